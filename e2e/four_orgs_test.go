//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/palisade-dev/palisade/internal/dkg"
	"github.com/palisade-dev/palisade/protocol"
	"github.com/palisade-dev/palisade/verifier"
)

// Limits of TestFourOrganisations; each is a hang ceiling.
const (
	// orgsLimit bounds the whole test.
	orgsLimit = 9 * time.Minute
	// ceremonyLimit bounds the DKG, from the first member's start to the
	// last one's exit.
	ceremonyLimit = 3 * time.Minute
	// orgsCPUShares is every container's CPU weight (Docker's default is
	// 1024): the suite yields to whatever else the machine runs.
	orgsCPUShares = "128"
)

// orgs are the four organisations; org i+1 runs node i+1.
var orgs = []string{"a", "b", "c", "d"}

// handover is what one organisation publishes to the others out of band
// (docs/deploy.md, "The ceremony between organisations"): its node's
// peer ID and announced address, and its client's entry.
type handover struct {
	Node   dkg.Member          `json:"node"`
	Client protocol.ClientInfo `json:"client"`
}

// fourOrgs is the deployment: per organisation a host directory of its
// own (no folder is shared between organisations) and a Docker network
// of its own; the nodes and the clients are also on a shared "internet"
// network, where each node is reached by the DNS name it announces.
type fourOrgs struct {
	t        *testing.T
	ctx      context.Context
	env      []string
	bin      string
	image    string
	prefix   string            // of every container and network name
	dir      map[string]string // organisation -> its own host directory
	internet string
	clusterI string // the cluster ID the ceremony printed
}

// TestFourOrganisations deploys Palisade the way docs/deploy.md tells four
// organisations to, each on its own Docker network with its own host
// directory, and runs it:
//
//  1. each organisation makes its node's and its client's identity and
//     hands over its peer IDs and its node's announced address
//     (/dns4/node-X.example/tcp/4001, a name only the shared "internet"
//     network resolves); organisation A assembles the member list and
//     hands it to the others; every file crosses between organisations
//     only as a copy the test makes, as operators send files out of band;
//  2. the four run "palisade dkg --listen /ip4/0.0.0.0/tcp/4001" at the
//     same time, each in its own container, and compare the cluster.json
//     hashes they printed (handed over too); every one pins the cluster
//     ID the ceremony printed (PALISADE_CLUSTER_ID);
//  3. the nodes run; organisation C runs "palisade resource"; a client
//     of B writes through C's resource, then a client of A acquires and
//     writes: C admits A's write and refuses B's older token (409);
//  4. with organisation D's machines stopped, A still acquires; with C's
//     stopped too, acquire exits 4 naming nodes 3 and 4.
func TestFourOrganisations(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), orgsLimit)
	defer cancel()
	start := time.Now()
	repo, err := filepath.Abs("..")
	require.NoError(t, err)
	o := &fourOrgs{t: t, ctx: ctx, env: cleanEnv(), prefix: fmt.Sprintf("palisade-orgs-%d", os.Getpid()), dir: map[string]string{}}
	o.bin, o.image = buildImage(ctx, t, repo, o.env, o.prefix+":test")
	t.Cleanup(o.cleanup)

	// Networks: one per organisation, one shared.
	o.internet = o.prefix + "-internet"
	o.docker("network", "create", "--label", "palisade-e2e="+o.prefix, o.internet)
	for _, org := range orgs {
		o.dir[org] = t.TempDir()
		o.docker("network", "create", "--label", "palisade-e2e="+o.prefix, o.orgNet(org))
	}

	// 1. Identities and hand-overs.
	var list dkg.MemberList
	list.Name = "four-orgs"
	for _, org := range orgs {
		nodeID := o.palisadeHost("identity", "--identity", o.path(org, "node", "identity.key"))
		clientID := o.palisadeHost("identity", "--identity", o.path(org, "client", "client.key"))
		h := handover{
			Node:   dkg.Member{PeerID: nodeID, Addrs: []string{"/dns4/" + nodeName(org) + "/tcp/4001"}},
			Client: protocol.ClientInfo{Name: "app-" + org, PeerID: clientID, Resources: []string{"orders-*"}},
		}
		o.writeJSON(o.path(org, "out", "handover.json"), h)
		// Sent to organisation A, which assembles the member list.
		got := o.handOver(org, "out/handover.json", "a", fmt.Sprintf("in/handover-%s.json", org))
		var in handover
		require.NoError(t, json.Unmarshal(got, &in))
		list.Members = append(list.Members, in.Node)
		list.Clients = append(list.Clients, in.Client)
	}
	o.writeJSON(o.path("a", "out", "members.json"), list)
	for _, org := range orgs {
		o.handOver("a", "out/members.json", org, "node/members.json")
	}

	// 2. The ceremony, all four at once, each on its own machine.
	ceremonyStart := time.Now()
	for _, org := range orgs {
		o.startContainer(org, "dkg", true, o.path(org, "node"), "/data",
			"dkg", "--members", "/data/members.json", "--identity", "/data/identity.key",
			"--dir", "/data/node", "--listen", "/ip4/0.0.0.0/tcp/4001", "--phase-timeout", "90s")
	}
	hashRE := regexp.MustCompile(`(?m)^cluster\.json sha256 ([0-9a-f]{64})$`)
	idRE := regexp.MustCompile(`(?m)^cluster four-orgs n=4 t=3 id=([0-9a-f]{64})$`)
	for i, org := range orgs {
		name := o.container(org, "dkg")
		code := o.waitExit(name, ceremonyLimit-time.Since(ceremonyStart))
		stdout, stderr := o.logs(name)
		require.Equal(t, 0, code, "organisation %s's dkg:\n%s\n%s", org, stdout, stderr)
		require.Contains(t, stdout, fmt.Sprintf("node%d dir=/data/node", i+1))
		m := hashRE.FindStringSubmatch(stdout)
		require.NotNil(t, m, stdout)
		id := idRE.FindStringSubmatch(stdout)
		require.NotNil(t, id, stdout)
		if o.clusterI == "" {
			o.clusterI = id[1]
		}
		require.Equal(t, o.clusterI, id[1], "organisation %s", org)
		// Each organisation publishes the hash it printed and checks its
		// own file against it.
		raw, err := os.ReadFile(o.path(org, "node", "node", "cluster.json"))
		require.NoError(t, err)
		sum := sha256.Sum256(raw)
		require.Equal(t, m[1], hex.EncodeToString(sum[:]))
		require.NoError(t, os.WriteFile(o.path(org, "out", "cluster.sha256"), []byte(m[1]+"\n"), 0o644))
		o.docker("rm", name)
	}
	t.Logf("ceremony among four organisations: %v; cluster ID %s", time.Since(ceremonyStart).Round(100*time.Millisecond), o.clusterI)
	// Every organisation compares the others' hashes with its own.
	for _, org := range orgs {
		own, err := os.ReadFile(o.path(org, "out", "cluster.sha256"))
		require.NoError(t, err)
		for _, other := range orgs {
			if other != org {
				require.Equal(t, string(own), string(o.handOver(other, "out/cluster.sha256", org, "in/cluster-"+other+".sha256")), "%s vs %s", org, other)
			}
		}
	}
	cluster, err := protocol.LoadCluster(o.path("a", "node", "node", "cluster.json"))
	require.NoError(t, err)
	require.Equal(t, o.clusterI, cluster.ID.String())
	for i, org := range orgs {
		require.Equal(t, []string{"/dns4/" + nodeName(org) + "/tcp/4001"}, cluster.File.Nodes[i].Addrs)
		var nf struct {
			Listen []string `json:"listen"`
		}
		raw, err := os.ReadFile(o.path(org, "node", "node", "node.json"))
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(raw, &nf))
		require.Equal(t, []string{"/ip4/0.0.0.0/tcp/4001"}, nf.Listen, "organisation %s listens apart from what it announces", org)
	}

	// 3. Nodes, a resource at C, clients of B and A.
	for _, org := range orgs {
		o.startContainer(org, "node", true, o.path(org, "node", "node"), "/data", "node", "--dir", "/data")
		// Each client's cluster.json is its own organisation's copy.
		o.handOver(org, "node/node/cluster.json", org, "client/cluster.json")
	}
	o.handOver("c", "node/node/cluster.json", "c", "resource/cluster.json")
	o.startContainer("c", "resource", true, o.path("c", "resource"), "/data",
		"resource", "--cluster", "/data/cluster.json", "--cluster-id", o.clusterI, "--data", "/data/res", "--listen", "0.0.0.0:7070")
	resIP := o.ip(o.container("c", "resource"), o.internet)
	resURL := "http://" + resIP + ":7070"
	ver := verifier.New(cluster)

	putRE := regexp.MustCompile(`(?m)^acquired orders-db epoch=(\d+) token=(\S+)$`)
	put := func(org, value string) protocol.Token {
		t.Helper()
		stdout, stderr, code := o.client(org, 2*time.Minute, "put", "--wait", "60s", "--url", "http://"+resName()+":7070", "orders-db", value)
		require.Equal(t, 0, code, "put from %s:\n%s\n%s", org, stdout, stderr)
		m := putRE.FindStringSubmatch(stdout)
		require.NotNil(t, m, stdout)
		require.Contains(t, stdout, "put orders-db epoch="+m[1]+" status=204")
		tok, err := ver.ParseAndVerify(m[2])
		require.NoError(t, err)
		return tok
	}
	fromB := put("b", "written by B")
	fromA := put("a", "written by A")
	require.Greater(t, fromA.Epoch, fromB.Epoch)
	code, body := o.httpDo(http.MethodPut, resURL, &fromB, "B again, with its old token")
	require.Equal(t, http.StatusConflict, code, body)
	code, body = o.httpDo(http.MethodGet, resURL, &fromA, "")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "written by A", body)
	t.Logf("C admitted A's write at epoch %d and refused B's token of epoch %d", fromA.Epoch, fromB.Epoch)

	// A client whose cluster file is of another cluster than the pin is
	// refused before it dials.
	_, stderr, code := o.client("a", cmdLimit, "status", "--cluster-id", strings.Repeat("0", 64))
	require.Equal(t, 1, code, stderr)
	require.Contains(t, stderr, "cluster file does not have the pinned cluster ID")

	// 4. One organisation's machines stopped, then two.
	o.docker("stop", "-t", "5", o.container("d", "node"))
	stdout, stderr, code := o.client("a", 2*time.Minute, "acquire", "--ttl", "5s", "--wait", "60s", "orders-one-org-down")
	require.Equal(t, 0, code, "acquire with D down:\n%s", stderr)
	_, err = ver.ParseAndVerify(strings.TrimSpace(stdout))
	require.NoError(t, err)
	o.docker("stop", "-t", "5", o.container("c", "node"), o.container("c", "resource"))
	const wait = 5 * time.Second
	stdout, stderr, code = o.client("a", wait+cmdLimit, "acquire", "--ttl", "5s", "--wait", wait.String(), "orders-two-orgs-down")
	require.Equal(t, 4, code, "acquire with C and D down:\n%s\n%s", stdout, stderr)
	require.Empty(t, strings.TrimSpace(stdout))
	requireNotEnoughNodes(t, stderr, 3, 4)
	t.Logf("two organisations down: %s", firstLine(stderr))
	t.Logf("TestFourOrganisations took %v (build and image included)", time.Since(start).Round(time.Second))
}

// nodeName is organisation org's node's name on the internet network.
func nodeName(org string) string { return "node-" + org + ".example" }

// resName is organisation C's resource's name on the internet network.
func resName() string { return "resource-c.example" }

// orgNet is organisation org's own network.
func (o *fourOrgs) orgNet(org string) string { return o.prefix + "-org-" + org }

// container names organisation org's container for role.
func (o *fourOrgs) container(org, role string) string {
	return fmt.Sprintf("%s-%s-%s", o.prefix, org, role)
}

// path is a file in organisation org's own directory; its parent exists.
func (o *fourOrgs) path(org string, elem ...string) string {
	p := filepath.Join(append([]string{o.dir[org]}, elem...)...)
	require.NoError(o.t, os.MkdirAll(filepath.Dir(p), 0o700))
	return p
}

// handOver copies organisation from's file to organisation to's
// directory: a file sent out of band. It returns the bytes.
func (o *fourOrgs) handOver(from, src, to, dst string) []byte {
	o.t.Helper()
	b, err := os.ReadFile(filepath.Join(o.dir[from], src))
	require.NoError(o.t, err)
	require.NoError(o.t, os.WriteFile(o.path(to, dst), b, 0o644))
	return b
}

func (o *fourOrgs) writeJSON(path string, v any) {
	o.t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	require.NoError(o.t, err)
	require.NoError(o.t, os.WriteFile(path, append(b, '\n'), 0o644))
}

// run runs a command within limit; it returns stdout, stderr and the exit
// status (-1 if it did not run or was killed at the limit).
func (o *fourOrgs) run(limit time.Duration, name string, args ...string) (string, string, int) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(o.ctx), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = o.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if err != nil {
		code = -1
		if ee, ok := err.(*exec.ExitError); ok && ctx.Err() == nil {
			code = ee.ExitCode()
		}
	}
	return stdout.String(), stderr.String(), code
}

// docker runs a docker command and fails the test unless it succeeds.
func (o *fourOrgs) docker(args ...string) string {
	o.t.Helper()
	stdout, stderr, code := o.run(cmdLimit, "docker", args...)
	require.Equal(o.t, 0, code, "docker %s:\n%s", strings.Join(args, " "), stderr)
	return stdout
}

// palisadeHost runs the binary on the host (an organisation's own
// machine, working in its own directory) and returns its stdout.
func (o *fourOrgs) palisadeHost(args ...string) string {
	o.t.Helper()
	stdout, stderr, code := o.run(cmdLimit, o.bin, args...)
	require.Equal(o.t, 0, code, "palisade %s:\n%s", strings.Join(args, " "), stderr)
	return strings.TrimSpace(stdout)
}

// startContainer creates organisation org's container for role from the
// image, with dir mounted at mount, on the organisation's network and,
// if public, on the internet network under the role's public name, and
// starts it.
func (o *fourOrgs) startContainer(org, role string, public bool, dir, mount string, args ...string) {
	o.t.Helper()
	name := o.container(org, role)
	create := []string{"create", "--name", name, "--label", "palisade-e2e=" + o.prefix, "--cpu-shares", orgsCPUShares,
		"--network", o.orgNet(org), "-v", dir + ":" + mount, o.image}
	o.docker(append(create, args...)...)
	if public {
		alias := nodeName(org)
		if role == "resource" {
			alias = resName()
		}
		o.docker("network", "connect", "--alias", alias, o.internet, name)
	}
	o.docker("start", name)
}

// client runs one client command of organisation org in a fresh
// container of that organisation (its network, and the internet to reach
// the members), with the organisation's own cluster file, client key and
// pinned cluster ID; it returns stdout, stderr and the exit status.
func (o *fourOrgs) client(org string, limit time.Duration, args ...string) (string, string, int) {
	o.t.Helper()
	name := fmt.Sprintf("%s-%s-client-%d", o.prefix, org, time.Now().UnixNano())
	create := []string{"create", "--name", name, "--label", "palisade-e2e=" + o.prefix, "--cpu-shares", orgsCPUShares,
		"--network", o.orgNet(org), "-v", filepath.Join(o.dir[org], "client") + ":/org",
		"-e", "PALISADE_CLUSTER=/org/cluster.json", "-e", "PALISADE_IDENTITY=/org/client.key",
		"-e", "PALISADE_CLUSTER_ID=" + o.clusterI, o.image}
	o.docker(append(create, args...)...)
	defer func() {
		if _, stderr, code := o.run(cmdLimit, "docker", "rm", "-f", name); code != 0 {
			o.t.Errorf("docker rm %s: %s", name, stderr)
		}
	}()
	o.docker("network", "connect", o.internet, name)
	return o.run(limit, "docker", "start", "-a", name)
}

// waitExit waits at most limit for a container to exit and returns its
// status.
func (o *fourOrgs) waitExit(name string, limit time.Duration) int {
	o.t.Helper()
	stdout, stderr, code := o.run(limit, "docker", "wait", name)
	require.Equal(o.t, 0, code, "docker wait %s (limit %v): %s", name, limit, stderr)
	var status int
	_, err := fmt.Sscan(strings.TrimSpace(stdout), &status)
	require.NoError(o.t, err)
	return status
}

// logs returns a container's stdout and stderr.
func (o *fourOrgs) logs(name string) (string, string) {
	o.t.Helper()
	stdout, stderr, code := o.run(cmdLimit, "docker", "logs", name)
	require.Equal(o.t, 0, code, stderr)
	return stdout, stderr
}

// ip is a container's address on a network.
func (o *fourOrgs) ip(name, network string) string {
	o.t.Helper()
	ip := strings.TrimSpace(o.docker("inspect", "-f", fmt.Sprintf(`{{(index .NetworkSettings.Networks %q).IPAddress}}`, network), name))
	require.NotEmpty(o.t, ip)
	return ip
}

// httpDo sends one request to the resource at base; tok may be nil.
func (o *fourOrgs) httpDo(method, base string, tok *protocol.Token, body string) (int, string) {
	o.t.Helper()
	ctx, cancel := context.WithTimeout(o.ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, base+"/kv/orders-db", strings.NewReader(body))
	require.NoError(o.t, err)
	if tok != nil {
		req.Header.Set(verifier.HeaderToken, tok.String())
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(o.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	require.NoError(o.t, err)
	return resp.StatusCode, string(b)
}

// cleanup removes every container and network the test made, logging the
// containers' output first if the test failed, and checks nothing is
// left.
func (o *fourOrgs) cleanup() {
	t := o.t
	label := "label=palisade-e2e=" + o.prefix
	ids, _, _ := o.run(cmdLimit, "docker", "ps", "-aq", "--filter", label)
	if t.Failed() {
		for _, id := range strings.Fields(ids) {
			name, _, _ := o.run(cmdLimit, "docker", "inspect", "-f", "{{.Name}}", id)
			out, errb, _ := o.run(cmdLimit, "docker", "logs", "--tail", "40", id)
			t.Logf("%s:\n%s%s", strings.TrimSpace(name), out, errb)
		}
	}
	if f := strings.Fields(ids); len(f) > 0 {
		if _, stderr, code := o.run(cmdLimit, "docker", append([]string{"rm", "-f", "-v"}, f...)...); code != 0 {
			t.Errorf("cleanup: %s", stderr)
		}
	}
	nets, _, _ := o.run(cmdLimit, "docker", "network", "ls", "-q", "--filter", label)
	if f := strings.Fields(nets); len(f) > 0 {
		if _, stderr, code := o.run(cmdLimit, "docker", append([]string{"network", "rm"}, f...)...); code != 0 {
			t.Errorf("cleanup: %s", stderr)
		}
	}
	left, _, _ := o.run(cmdLimit, "docker", "ps", "-aq", "--filter", label)
	leftNets, _, _ := o.run(cmdLimit, "docker", "network", "ls", "-q", "--filter", label)
	if strings.TrimSpace(left) != "" || strings.TrimSpace(leftNets) != "" {
		t.Errorf("cleanup left containers %q, networks %q", left, leftNets)
	}
}
