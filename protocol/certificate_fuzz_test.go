package protocol

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// Certificates and the forensics messages keep their fuzz targets and
// seed corpus here, beside the other decoders' (fuzz_test.go), with the
// same rules: every seed is named valid-… or invalid-…, decodes exactly
// when it says so, and the committed files under testdata/fuzz/<Target>
// match certificateSeeds. (The Commit's certificate field is seeded in
// FuzzCommitRequest, from validMessages and below.)

var certificateFuzzTargets = []string{"FuzzCertificate", "FuzzForensicsRequest", "FuzzForensicsReply", "FuzzCommitCertificate"}

// wcvotes is a certificate's votes field, written as given (unsorted,
// duplicated or short signatures included).
func wcvotes(vs ...CertVote) []byte {
	e := encoder{}
	e.uvarint(uint64(len(vs)))
	for _, v := range vs {
		e.u16(uint16(v.Node))
		e.fixed(v.Sig)
	}
	return e.b
}

// wcert is a certificate body: the statement, then the votes field.
func wcert(st Statement, votes []byte) []byte {
	e := encoder{}
	e.fixed(st.Cluster[:])
	e.str(st.Resource)
	e.u64(st.Epoch)
	e.holder(st.Holder)
	return append(e.b, votes...)
}

// certificateSeeds returns the seeds of the certificate fuzz targets.
func certificateSeeds(tb testing.TB) map[string][]seed {
	tb.Helper()
	fx := testFixture(tb)
	out := map[string][]seed{}
	add := func(target, name string, data []byte) {
		out[target] = append(out[target], seed{name: name, data: data})
	}
	addValid := func(target, name string, data []byte) {
		add(target, "valid-"+name, data)
		add(target, "invalid-truncated-"+name, data[:len(data)-1])
		add(target, "invalid-trailing-"+name, append(append([]byte(nil), data...), 0))
	}
	mustBin := func(c Certificate) []byte {
		b, err := c.MarshalBinary()
		if err != nil {
			tb.Fatal(err)
		}
		return b
	}
	st := fx.stmt
	sig := fx.identitySig
	cert := Certificate{Statement: st, Votes: testCertVotes(fx, 1, 2, 3)}
	other := st
	other.Holder = otherHolder
	otherCert := Certificate{Statement: other, Votes: testCertVotes(fx, 2, 3, 4)}
	big := st
	big.Resource = strings.Repeat("r", MaxResourceLen)
	big.Holder.ID = strings.Repeat("h", MaxHolderLen)
	big.Epoch = ^uint64(0)
	members := make([]int, MaxCertificateVotes)
	for i := range members {
		members[i] = i + 1
	}
	bigCert := Certificate{Statement: big, Votes: testCertVotes(fx, members...)}
	bigOther := bigCert
	bigOther.Statement.Holder.Session = otherHolder.Session

	// Certificates.
	addValid("FuzzCertificate", "certificate", mustBin(cert))
	addValid("FuzzCertificate", "one-vote", mustBin(Certificate{Statement: st, Votes: testCertVotes(fx, 7)}))
	addValid("FuzzCertificate", "max-fields", mustBin(bigCert))
	addValid("FuzzCertificate", "max-node-index", mustBin(Certificate{Statement: st, Votes: testCertVotes(fx, 1, 1024)}))
	v := func(node int) CertVote { return CertVote{Node: node, Sig: sig} }
	add("FuzzCertificate", "invalid-empty", []byte{})
	add("FuzzCertificate", "invalid-no-votes", wire(wcert(st, wcvotes())))
	add("FuzzCertificate", "invalid-node-twice", wire(wcert(st, wcvotes(v(1), v(1), v(2)))))
	add("FuzzCertificate", "invalid-unsorted", wire(wcert(st, wcvotes(v(2), v(1), v(3)))))
	add("FuzzCertificate", "invalid-node-0", wire(wcert(st, wcvotes(v(0), v(1)))))
	add("FuzzCertificate", "invalid-node-1025", wire(wcert(st, wcvotes(v(1), v(1025)))))
	two := wcvotes(v(1), v(2))
	add("FuzzCertificate", "invalid-count-short", wire(wcert(st, two[:len(two)-certVoteSize])))
	// A count of 257 (uvarint 0x81 0x02), then one vote.
	add("FuzzCertificate", "invalid-too-many-votes", wire(wcert(st, append([]byte{0x81, 0x02}, wcvotes(v(1))[1:]...))))
	add("FuzzCertificate", "invalid-non-minimal-count", wire(wcert(st, append([]byte{0x81, 0x00}, wcvotes(v(1))[1:]...))))
	add("FuzzCertificate", "invalid-zero-holder", wire(wcert(Statement{Cluster: st.Cluster, Resource: st.Resource, Epoch: st.Epoch}, wcvotes(v(1)))))
	add("FuzzCertificate", "invalid-resource-rlo", wire(wcert(Statement{Cluster: st.Cluster, Resource: "orders-\u202egpj.exe", Epoch: st.Epoch, Holder: st.Holder}, wcvotes(v(1)))))
	add("FuzzCertificate", "invalid-version-2", append([]byte{2}, mustBin(cert)[1:]...))

	// Forensics requests.
	addValid("FuzzForensicsRequest", "request", ForensicsRequest{Cluster: st.Cluster, Resource: st.Resource, Epoch: st.Epoch}.Marshal())
	addValid("FuzzForensicsRequest", "max-fields", ForensicsRequest{Cluster: st.Cluster, Resource: big.Resource, Epoch: big.Epoch}.Marshal())
	add("FuzzForensicsRequest", "invalid-empty-resource", wire(st.Cluster[:], wstr(""), wu64(1)))
	add("FuzzForensicsRequest", "invalid-resource-space", wire(st.Cluster[:], wstr("a b"), wu64(1)))
	add("FuzzForensicsRequest", "invalid-short-cluster", wire(st.Cluster[:31]))

	// Forensics replies.
	addValid("FuzzForensicsReply", "none", ForensicsReply{}.Marshal())
	addValid("FuzzForensicsReply", "one", ForensicsReply{Certificates: []Certificate{cert}}.Marshal())
	addValid("FuzzForensicsReply", "fork", ForensicsReply{Certificates: []Certificate{cert, otherCert}}.Marshal())
	addValid("FuzzForensicsReply", "fork-max-fields", ForensicsReply{Certificates: []Certificate{bigCert, bigOther}}.Marshal())
	addValid("FuzzForensicsReply", "refused", ForensicsReply{Code: CodeUnauthorised, Message: "may not access"}.Marshal())
	otherTok := fx.tok
	otherTok.Holder = otherHolder
	addValid("FuzzForensicsReply", "fork-tokens", ForensicsReply{Certificates: []Certificate{cert, otherCert}, Tokens: []Token{fx.tok, otherTok}}.Marshal())
	addValid("FuzzForensicsReply", "one-token", ForensicsReply{Tokens: []Token{fx.tok}}.Marshal())
	certBody := func(c Certificate) []byte { return wcert(c.Statement, wcvotes(c.Votes...)) }
	tokBody := func(t Token) []byte { return t.appendTo(nil) }
	add("FuzzForensicsReply", "invalid-three-tokens", wire(wu8(0), wu8(0), wu8(3), tokBody(fx.tok), tokBody(otherTok), tokBody(fx.tok), wstr("")))
	add("FuzzForensicsReply", "invalid-token-holder-twice", wire(wu8(0), wu8(0), wu8(2), tokBody(fx.tok), tokBody(fx.tok), wstr("")))
	otherEpochTok := otherTok
	otherEpochTok.Epoch++
	add("FuzzForensicsReply", "invalid-token-other-epoch", wire(wu8(0), wu8(0), wu8(2), tokBody(fx.tok), tokBody(otherEpochTok), wstr("")))
	add("FuzzForensicsReply", "invalid-token-count-short", wire(wu8(0), wu8(0), wu8(2), tokBody(fx.tok), wstr("")))
	add("FuzzForensicsReply", "invalid-three", wire(wu8(0), wu8(3), certBody(cert), certBody(otherCert), certBody(cert), wu8(0), wstr("")))
	add("FuzzForensicsReply", "invalid-same-holder-twice", wire(wu8(0), wu8(2), certBody(cert), certBody(Certificate{Statement: st, Votes: testCertVotes(fx, 2)}), wu8(0), wstr("")))
	otherEpoch := otherCert
	otherEpoch.Statement.Epoch++
	add("FuzzForensicsReply", "invalid-other-epoch", wire(wu8(0), wu8(2), certBody(cert), certBody(otherEpoch), wu8(0), wstr("")))
	otherRes := otherCert
	otherRes.Statement.Resource = "invoices"
	add("FuzzForensicsReply", "invalid-other-resource", wire(wu8(0), wu8(2), certBody(cert), certBody(otherRes), wu8(0), wstr("")))
	add("FuzzForensicsReply", fmt.Sprintf("invalid-code-%d", codeMax+1), wire(wu8(uint8(codeMax)+1), wu8(0), wstr("")))
	add("FuzzForensicsReply", "invalid-count-short", wire(wu8(0), wu8(2), certBody(cert), wu8(0), wstr("")))

	// The Commit's certificate: the 2.0.0 fields, then the votes.
	tokBin := fx.tok.appendTo(nil)
	key := wkey(testKey)
	commit := CommitRequest{Token: fx.tok, TTL: time.Second, Key: testKey, Certificate: testCertVotes(fx, 1, 2, 3)}
	addValid("FuzzCommitCertificate", "commit", commit.Marshal())
	addValid("FuzzCommitCertificate", "commit-2.0.0", CommitRequest{Token: fx.tok, TTL: time.Second, Key: testKey}.Marshal())
	addValid("FuzzCommitCertificate", "commit-max-votes", CommitRequest{Token: fx.tok, Certificate: testCertVotes(fx, members...)}.Marshal())
	add("FuzzCommitCertificate", "invalid-zero-votes", wire(tokBin, wu64(1000), wu8(1), key, wu8(0), wcvotes()))
	add("FuzzCommitCertificate", "invalid-node-twice", wire(tokBin, wu64(1000), wu8(1), key, wu8(0), wcvotes(v(1), v(1), v(2))))
	add("FuzzCommitCertificate", "invalid-unsorted", wire(tokBin, wu64(1000), wu8(1), key, wu8(0), wcvotes(v(3), v(1), v(2))))
	add("FuzzCommitCertificate", "invalid-short-signature", wire(tokBin, wu64(1000), wu8(1), key, wu8(0), wcvotes(CertVote{Node: 1, Sig: sig[:63]})))
	return out
}

// TestWriteCertificateSeedCorpus checks that testdata/fuzz holds the
// certificate targets' seed corpus; with -write-corpus it writes it (see
// TestWriteSeedCorpus).
func TestWriteCertificateSeedCorpus(t *testing.T) {
	syncSeedCorpus(t, certificateSeeds(t), certificateFuzzTargets, "TestWriteCertificateSeedCorpus")
}

// TestCertificateSeedsClassified checks each seed decodes exactly when it
// is named valid.
func TestCertificateSeedsClassified(t *testing.T) {
	decoders := map[string]func([]byte) error{
		"FuzzCertificate":       func(b []byte) error { _, err := ParseCertificate(b); return err },
		"FuzzForensicsRequest":  func(b []byte) error { _, err := UnmarshalForensicsRequest(b); return err },
		"FuzzForensicsReply":    func(b []byte) error { _, err := UnmarshalForensicsReply(b); return err },
		"FuzzCommitCertificate": func(b []byte) error { _, err := UnmarshalCommitRequest(b); return err },
	}
	requireSeedsClassified(t, certificateSeeds(t), decoders)
}

// addCertificateSeeds adds the valid seeds of target.
func addCertificateSeeds(f *testing.F, target string) {
	for _, s := range certificateSeeds(f)[target] {
		if s.valid() {
			f.Add(s.data)
		}
	}
}

func FuzzCertificate(f *testing.F) {
	addCertificateSeeds(f, "FuzzCertificate")
	fuzzRoundTrip(f, ParseCertificate, func(c Certificate) []byte {
		b, err := c.MarshalBinary()
		if err != nil {
			panic(fmt.Sprintf("parsed certificate does not marshal: %v", err))
		}
		return b
	})
}

func FuzzForensicsRequest(f *testing.F) {
	addCertificateSeeds(f, "FuzzForensicsRequest")
	fuzzRoundTrip(f, UnmarshalForensicsRequest, marshalOf[ForensicsRequest])
}

func FuzzForensicsReply(f *testing.F) {
	addCertificateSeeds(f, "FuzzForensicsReply")
	fuzzRoundTrip(f, UnmarshalForensicsReply, marshalOf[ForensicsReply])
}

// FuzzCommitCertificate fuzzes the Commit from seeds that carry
// certificates (FuzzCommitRequest starts from the other Commit seeds).
func FuzzCommitCertificate(f *testing.F) {
	addCertificateSeeds(f, "FuzzCommitCertificate")
	fuzzRoundTrip(f, UnmarshalCommitRequest, marshalOf[CommitRequest])
}
