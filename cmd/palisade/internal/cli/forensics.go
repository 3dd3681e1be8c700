package cli

import (
	"context"
	"encoding/hex"
	"flag"
	"fmt"
	"strconv"

	"github.com/palisade-dev/palisade/protocol"
)

const forensicsUsage = `Usage:
    palisade forensics --cluster FILE [--cluster-id ID] --identity FILE RESOURCE EPOCH

Names the members that made a fork. Every Commit carries the vote
certificate of its token (the identity-signed votes the client
combined), and members keep it. forensics asks every member for the
certificates it keeps for RESOURCE at EPOCH and checks each vote's
identity signature against the cluster file (no vote that fails counts).
If it finds certificates of two holders (a fork, which more than f
members are needed to make), every member that signed votes for both is
a culprit: at least f+1 of them, and never an honest member, which
signs one vote per resource and epoch. The two signed votes of each
culprit are sent to every member as evidence ("palisade evidence" lists
it) and printed; anyone with the cluster file can check them.

Members also show the certified tokens they keep there. If two of them,
for different holders, verify under the group key, they are the fork
itself: forensics prints it and shows it to every member, which records
it ("palisade evidence" lists it; "palisade fork" checks it).

Output: a line "certificate holder=H signers=1,2,3" per certificate
found, a line "fork id=ID resource=R epoch=E holders=H1,H2
fork=pf3.[...]" if the tokens fork, then one line per culprit, "culprit
node=I peer=P resource=R epoch=E holders=H1,H2 a=HEX b=HEX" (the two
signed votes, hex of their encodings, as "palisade evidence" prints
them), then the verdict. Votes or certificates refused are reported on
stderr.

Exit status: 7 when it convicts members, 8 when the tokens fork but the
certificates found do not convict (members of an earlier release keep
none), 0 when it finds no fork (it says so), 4 if no member answered, 5
if the identity is not a client of the cluster or may not access
RESOURCE, 1 on other errors. Members that do not answer are named on
stderr; their certificates are missing from the verdict, which is then a
lower bound.

Flags (environment variable in brackets):
    --cluster FILE    the cluster file [PALISADE_CLUSTER]
    --cluster-id ID   refuse a cluster file with another ID (64 hex) [PALISADE_CLUSTER_ID]
    --identity FILE   a client's key file, mode 0600 [PALISADE_IDENTITY]

Example:
    $ palisade forensics orders-db 1
    certificate holder=12D3KooW[...]/[...] signers=1,3,4
    certificate holder=12D3KooW[...]/[...] signers=2,3,4
    fork id=[...] resource=orders-db epoch=1 holders=[...] fork=pf3.[...]
    shown to the members: each records it (palisade evidence lists it)
    culprit node=3 peer=12D3KooW[...] resource=orders-db epoch=1 holders=[...] a=[...] b=[...]
    culprit node=4 peer=12D3KooW[...] resource=orders-db epoch=1 holders=[...] a=[...] b=[...]
    fork at orders-db epoch 1: 2 members convicted (at least f+1=2 expected [...]): 3,4
    palisade: error: forensics: 2 members voted for two holders at "orders-db" epoch 1
`

func forensicsFlags(fs *flag.FlagSet, c *Config) {
	clusterFlag(fs, c)
	fs.StringVar(&c.Identity, "identity", c.Identity, "")
}

// runForensics gathers the members' vote certificates and certified
// tokens for (RESOURCE, EPOCH) and prints the verdict: ExitConvicted if
// members signed votes for two holders there, ExitForkUnnamed if the
// tokens fork but no certificates name the culprits, ExitOK if no fork
// was found.
func runForensics(ctx context.Context, e *env, cfg Config, args []string) error {
	if len(args) != 2 {
		return usageErrorf("forensics", "forensics: want RESOURCE and EPOCH, got %d arguments", len(args))
	}
	resource := args[0]
	if err := protocol.ValidateResource(resource); err != nil {
		return usageErrorf("forensics", "forensics: RESOURCE: %v", err)
	}
	epoch, err := strconv.ParseUint(args[1], 10, 64)
	if err != nil || epoch == 0 {
		return usageErrorf("forensics", "forensics: EPOCH %q is not an epoch (a whole number from 1)", args[1])
	}
	s, err := checkSession("forensics", cfg, resource)
	if err != nil {
		return err
	}
	if err := s.connect(); err != nil {
		return err
	}
	defer s.c.Close()
	fx, err := s.c.Forensics(ctx, resource, epoch)
	for _, ne := range fx.Failed {
		fmt.Fprintf(e.stderr, "palisade: note: %v: its certificates are not in the verdict\n", ne)
	}
	if err != nil {
		return explainRequest(s.target(fmt.Sprintf("forensics %q at epoch %d", resource, epoch), resource), err)
	}
	for _, r := range fx.Verdict.Rejected {
		fmt.Fprintf(e.stderr, "palisade: note: refused, not counted: %v\n", r)
	}
	for _, c := range fx.Certificates {
		fmt.Fprintf(e.stdout, "certificate holder=%s signers=%s\n", c.Statement.Holder, joinInts(c.Signers()))
	}
	if fx.BadTokens > 0 {
		fmt.Fprintf(e.stderr, "palisade: note: %d of the %d tokens the members showed do not verify under the group key: not counted\n", fx.BadTokens, fx.Tokens)
	}
	if f := fx.Fork; f != nil {
		fmt.Fprintf(e.stdout, "fork id=%s resource=%s epoch=%d holders=%s,%s fork=%s\n", f.ID(), f.Resource(), f.Epoch(), f.A.Holder, f.B.Holder, f)
		fmt.Fprintf(e.stdout, "shown to the members: each records it (palisade evidence lists it)\n")
	}
	v := fx.Verdict
	if len(v.Culprits) == 0 && fx.Fork != nil {
		return &exitError{code: ExitForkUnnamed, err: fmt.Errorf("forensics: the members' tokens fork at %q epoch %d, but their certificates do not name the culprits (%d found; both holders' are needed)", resource, epoch, len(fx.Certificates))}
	}
	if len(v.Culprits) == 0 {
		switch {
		case len(fx.Certificates) == 0:
			fmt.Fprintf(e.stdout, "no fork found: %d of %d members answered and keep no certificate for %q at epoch %d\n", fx.Answered, len(s.cluster.File.Nodes), resource, epoch)
		default:
			fmt.Fprintf(e.stdout, "no fork found: %d of %d members answered; their certificates for %q at epoch %d name one holder\n", fx.Answered, len(s.cluster.File.Nodes), resource, epoch)
		}
		return nil
	}
	var nodes []int
	for _, cu := range v.Culprits {
		ev := cu.Evidence
		nodes = append(nodes, cu.Node)
		fmt.Fprintf(e.stdout, "culprit node=%d peer=%s resource=%s epoch=%d holders=%s,%s a=%s b=%s\n",
			cu.Node, s.cluster.File.Nodes[cu.Node-1].PeerID, resource, epoch, ev.A.Statement.Holder, ev.B.Statement.Holder,
			hex.EncodeToString(ev.A.Marshal()), hex.EncodeToString(ev.B.Marshal()))
	}
	what := "fork"
	if !v.Fork() {
		what = "double votes (the certificates found are not both complete)"
	}
	fmt.Fprintf(e.stdout, "%s at %s epoch %d: %d members convicted (at least f+1=%d expected with both certificates): %s\n",
		what, resource, epoch, len(nodes), s.cluster.F+1, joinInts(nodes))
	return &exitError{code: ExitConvicted, err: fmt.Errorf("forensics: %d members voted for two holders at %q epoch %d", len(nodes), resource, epoch)}
}

// joinInts lists integers separated by commas.
func joinInts(xs []int) string {
	out := ""
	for i, x := range xs {
		if i > 0 {
			out += ","
		}
		out += strconv.Itoa(x)
	}
	return out
}
