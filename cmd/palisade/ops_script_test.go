package main

import (
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// cmdFreePort is the script command "freeport VAR [N]": it finds N (1)
// consecutive free TCP ports on 127.0.0.1 and sets VAR to the first and
// VAR_1 … VAR_N to each, for the --admin ports of nodes and testnets.
func cmdFreePort(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 || len(args) > 2 {
		ts.Fatalf("usage: freeport VAR [N]")
	}
	n := 1
	if len(args) == 2 {
		var err error
		if n, err = strconv.Atoi(args[1]); err != nil || n < 1 || n > 100 {
			ts.Fatalf("freeport: bad count %q", args[1])
		}
	}
	for try := 0; try < 100; try++ {
		base := 20000 + rand.IntN(40000)
		var ls []net.Listener
		for i := 0; i < n; i++ {
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(base+i)))
			if err != nil {
				break
			}
			ls = append(ls, l)
		}
		for _, l := range ls {
			_ = l.Close()
		}
		if len(ls) == n {
			ts.Setenv(args[0], strconv.Itoa(base))
			for i := 1; i <= n; i++ {
				ts.Setenv(fmt.Sprintf("%s_%d", args[0], i), strconv.Itoa(base+i-1))
			}
			return
		}
	}
	ts.Fatalf("freeport: no %d consecutive free ports found", n)
}

// cmdRetry is the script command "[!] retry DURATION PROGRAM ARGS...": it
// runs the program every 200ms until it succeeds (with !: until it fails)
// or DURATION has passed, which fails the script. Its last run's stdout
// and stderr are kept for the next commands.
func cmdRetry(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 2 {
		ts.Fatalf("usage: retry DURATION PROGRAM [ARGS...]")
	}
	limit, err := time.ParseDuration(args[0])
	if err != nil {
		ts.Fatalf("retry: %v", err)
	}
	deadline := time.Now().Add(limit)
	for {
		err := ts.Exec(args[1], args[2:]...)
		if (err == nil) != neg {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("retry: %s did not %s within %v (last: %v)", strings.Join(args[1:], " "), map[bool]string{false: "succeed", true: "fail"}[neg], limit, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// cmdHup is the script command "hup TEXT": it sends SIGHUP to every
// background command whose command line contains TEXT (such as a node's
// directory), as an operator's "kill -HUP PID" does.
func cmdHup(ts *testscript.TestScript, neg bool, args []string) {
	signalBackground(ts, "hup", syscall.SIGHUP, neg, args)
}

// cmdTerm is the script command "term TEXT": SIGTERM, as "hup" sends
// SIGHUP (testscript's own kill sends only SIGINT and SIGKILL); what
// systemd and docker stop send.
func cmdTerm(ts *testscript.TestScript, neg bool, args []string) {
	signalBackground(ts, "term", syscall.SIGTERM, neg, args)
}

// signalBackground sends sig to every background command whose command
// line contains args[0].
func signalBackground(ts *testscript.TestScript, name string, sig syscall.Signal, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: %s TEXT", name)
	}
	sent := 0
	for _, c := range ts.BackgroundCmds() {
		if c.Process == nil || !strings.Contains(strings.Join(c.Args, " "), args[0]) {
			continue
		}
		if err := c.Process.Signal(sig); err != nil {
			ts.Fatalf("%s: %v", name, err)
		}
		sent++
	}
	if sent == 0 {
		ts.Fatalf("%s: no background command matches %q", name, args[0])
	}
}

// cmdEnvFile is the script command "envfile VAR FILE": it sets VAR to
// FILE's content without surrounding white space (a peer ID a command
// printed, for instance).
func cmdEnvFile(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: envfile VAR FILE")
	}
	ts.Setenv(args[0], strings.TrimSpace(ts.ReadFile(args[1])))
}
