package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.etcd.io/bbolt"

	"github.com/palisade-dev/palisade/crypto"
	"github.com/palisade-dev/palisade/node"
	"github.com/palisade-dev/palisade/protocol"
)

// ptestMain is the program "ptest" of the CLI scripts: what the scripts
// need and testscript lacks. Each subcommand is bounded in time.
//
//	ptest exits N CMD [ARGS]
//	    runs CMD with this program's stdin, stdout and stderr, passing
//	    SIGINT and SIGTERM on to it, and succeeds iff it exits with
//	    status N (the scripts' "exec" only tells zero from non-zero)
//	ptest env FILE [CODE]
//	    a COMMAND for palisade lock: prints "resource=R epoch=E" from
//	    PALISADE_RESOURCE and PALISADE_EPOCH, writes PALISADE_TOKEN to
//	    FILE, exits CODE (0)
//	ptest hold STARTED DONE [ignore-term]
//	    a COMMAND for palisade lock: writes PALISADE_TOKEN to STARTED,
//	    then waits (at most a minute) for the file DONE and exits 0. On
//	    SIGINT it exits 130, on SIGTERM 143, or with ignore-term it keeps
//	    waiting; it prints what happened
//	ptest exit N
//	    exits N
//	ptest args [ARGS]
//	    prints its arguments on one line
//	ptest sleep D
//	    sleeps D (at most a minute)
//	ptest client FILE NAME PEERID|@IDFILE [PATTERN...]
//	    sets the client entry of PEERID in the cluster file FILE (adds
//	    it, or replaces its name and patterns); @IDFILE reads the peer ID
//	    from a file, as "palisade identity" printed it
//	ptest oldshare DIR
//	    rewrites the node directory DIR's share.key as the bn256 release
//	    wrote its shares: the bare 34 bytes of index and scalar, no header
//	ptest oldstore DIR
//	    writes DIR/votes.db as the bn256 release left it: one record and
//	    no format
//	ptest fork DIR RESOURCE EPOCH PREFIX
//	    signs, with the shares of keygen's DIR/node2..node4 (t nodes that
//	    vote twice), two tokens for RESOURCE at EPOCH, held by "alice" and
//	    "bob", and writes PREFIX-alice.tok and PREFIX-bob.tok (text
//	    forms), their fork as PREFIX.txt (text form) and PREFIX.bin
//	    (binary form), and PREFIX-forged.txt: a fork whose second token
//	    carries the first one's signature (it decodes, never verifies);
//	    PREFIX.jsonl and PREFIX-forged.jsonl hold each as a line of a
//	    node's fork file (forks.jsonl)
func ptestMain() {
	if err := ptest(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "ptest: %v\n", err)
		os.Exit(1)
	}
}

// ptestLimit bounds every wait of ptest.
const ptestLimit = time.Minute

func ptest(args []string) error {
	if len(args) == 0 {
		return errors.New("no subcommand")
	}
	switch sub, args := args[0], args[1:]; {
	case sub == "exits" && len(args) >= 2:
		return ptestExits(args[0], args[1:])
	case sub == "env" && (len(args) == 1 || len(args) == 2):
		fmt.Printf("resource=%s epoch=%s\n", os.Getenv("PALISADE_RESOURCE"), os.Getenv("PALISADE_EPOCH"))
		if err := os.WriteFile(args[0], []byte(os.Getenv("PALISADE_TOKEN")+"\n"), 0o644); err != nil {
			return err
		}
		if len(args) == 2 {
			code, err := strconv.Atoi(args[1])
			if err != nil {
				return err
			}
			os.Exit(code)
		}
		return nil
	case sub == "hold" && (len(args) == 2 || len(args) == 3 && args[2] == "ignore-term"):
		return ptestHold(args[0], args[1], len(args) == 3)
	case sub == "args":
		fmt.Println(strings.Join(args, " "))
		return nil
	case sub == "exit" && len(args) == 1:
		code, err := strconv.Atoi(args[0])
		if err != nil {
			return err
		}
		os.Exit(code)
	case sub == "sleep" && len(args) == 1:
		d, err := time.ParseDuration(args[0])
		if err != nil {
			return err
		}
		time.Sleep(min(d, ptestLimit))
		return nil
	case sub == "client" && len(args) >= 3:
		return ptestClient(args[0], args[1], args[2], args[3:])
	case sub == "oldshare" && len(args) == 1:
		return ptestOldShare(args[0])
	case sub == "oldstore" && len(args) == 1:
		return ptestOldStore(args[0])
	case sub == "fork" && len(args) == 4:
		return ptestFork(args[0], args[1], args[2], args[3])
	}
	return fmt.Errorf("bad arguments: %q", args)
}

// ptestOldShare replaces dir's share.key by its bare form, which is
// byte for byte what a bn256 release wrote for a share (index and a
// 32-byte scalar).
func ptestOldShare(dir string) error {
	path := filepath.Join(dir, node.ShareFileName)
	share, err := node.ReadShareFile(path)
	if err != nil {
		return err
	}
	raw, err := share.MarshalBinary()
	if err != nil {
		return err
	}
	return os.WriteFile(path, raw, 0o600)
}

// ptestOldStore writes dir's votes.db as a bn256 release left it: the
// records and audit buckets, no format, one record with a bn256 vote.
func ptestOldStore(dir string) error {
	db, err := bbolt.Open(filepath.Join(dir, node.StoreFileName), 0o600, &bbolt.Options{Timeout: time.Second})
	if err != nil {
		return err
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		recs, err := tx.CreateBucket([]byte("records"))
		if err != nil {
			return err
		}
		if _, err := tx.CreateBucket([]byte("audit")); err != nil {
			return err
		}
		return recs.Put([]byte("orders-db"), []byte(`{"resource":"orders-db","last_epoch":3,"vote":"0001`+strings.Repeat("ab", 64)+`"}`))
	})
	return errors.Join(err, db.Close())
}

func ptestExits(want string, argv []string) error {
	code, err := strconv.Atoi(want)
	if err != nil {
		return err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() {
		for s := range sigs {
			_ = cmd.Process.Signal(s)
		}
	}()
	err = cmd.Wait()
	signal.Stop(sigs)
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return err
	}
	if got := cmd.ProcessState.ExitCode(); got != code {
		return fmt.Errorf("%s exited with status %d, want %d", argv[0], got, code)
	}
	return nil
}

func ptestHold(started, done string, ignoreTerm bool) error {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	if err := os.WriteFile(started, []byte(os.Getenv("PALISADE_TOKEN")+"\n"), 0o644); err != nil {
		return err
	}
	fmt.Println("ptest: holding")
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(ptestLimit)
	for {
		select {
		case s := <-sigs:
			switch {
			case s == os.Interrupt:
				fmt.Println("ptest: interrupted")
				os.Exit(130)
			case ignoreTerm:
				fmt.Println("ptest: ignoring SIGTERM")
			default:
				fmt.Println("ptest: terminated")
				os.Exit(143)
			}
		case <-tick.C:
			if _, err := os.Stat(done); err == nil {
				fmt.Println("ptest: done")
				return nil
			}
		case <-deadline:
			return fmt.Errorf("%s did not appear within %v", done, ptestLimit)
		}
	}
}

func ptestClient(file, name, id string, patterns []string) error {
	if rest, ok := strings.CutPrefix(id, "@"); ok {
		b, err := os.ReadFile(rest)
		if err != nil {
			return err
		}
		id = strings.TrimSpace(string(b))
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var cf protocol.ClusterFile
	if err := json.Unmarshal(b, &cf); err != nil {
		return err
	}
	entry := protocol.ClientInfo{Name: name, PeerID: id, Resources: patterns}
	replaced := false
	for i, c := range cf.Clients {
		if c.PeerID == id {
			cf.Clients[i], replaced = entry, true
		}
	}
	if !replaced {
		cf.Clients = append(cf.Clients, entry)
	}
	return cf.Save(file)
}

// ptestFork makes two tokens at one (resource, epoch) for two holders, as
// t colluding or forgetful nodes can, and writes them and their fork.
func ptestFork(dir, resource, epochText, prefix string) error {
	epoch, err := strconv.ParseUint(epochText, 10, 64)
	if err != nil {
		return err
	}
	c, err := protocol.LoadCluster(filepath.Join(dir, "cluster.json"))
	if err != nil {
		return err
	}
	var shares []*crypto.Share
	for i := c.File.N - c.File.T + 1; i <= c.File.N; i++ {
		share, err := node.ReadShareFile(filepath.Join(dir, fmt.Sprintf("node%d", i), node.ShareFileName))
		if err != nil {
			return err
		}
		shares = append(shares, share)
	}
	issue := func(holder string, session byte) (protocol.Token, error) {
		st := c.Statement(resource, epoch, protocol.Holder{ID: holder, Session: protocol.SessionID{session}})
		msg := st.SignedBytes()
		var parts []crypto.PartialSig
		for _, s := range shares {
			p, err := s.Sign(msg)
			if err != nil {
				return protocol.Token{}, err
			}
			parts = append(parts, p)
		}
		sig, _, err := c.Key.Combine(msg, parts)
		if err != nil {
			return protocol.Token{}, err
		}
		return protocol.Token{Statement: st, Signature: sig}, nil
	}
	alice, err := issue("alice", 1)
	if err != nil {
		return err
	}
	bob, err := issue("bob", 2)
	if err != nil {
		return err
	}
	fork, err := protocol.NewFork(alice, bob)
	if err != nil {
		return err
	}
	bin, err := fork.MarshalBinary()
	if err != nil {
		return err
	}
	forged := bob
	forged.Signature = alice.Signature
	forgedFork, err := protocol.NewFork(alice, forged)
	if err != nil {
		return err
	}
	line := func(f protocol.Fork) []byte {
		b, _ := json.Marshal(map[string]string{"fork": f.String()}) // a map of strings always encodes
		return append(b, '\n')
	}
	files := map[string][]byte{
		prefix + ".jsonl":        line(fork),
		prefix + "-forged.jsonl": line(forgedFork),
		prefix + "-alice.tok":    []byte(alice.String() + "\n"),
		prefix + "-bob.tok":      []byte(bob.String() + "\n"),
		prefix + ".txt":          []byte(fork.String() + "\n"),
		prefix + ".bin":          bin,
		prefix + "-forged.txt":   []byte(forgedFork.String() + "\n"),
	}
	for name, b := range files {
		if err := os.WriteFile(name, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
