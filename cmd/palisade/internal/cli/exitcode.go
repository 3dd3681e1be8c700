package cli

import (
	"errors"
	"fmt"

	"github.com/palisade-dev/palisade/client"
)

// The exit statuses of palisade, for scripts. "palisade help" and the
// README list them; ExitCode picks one for an error.
const (
	// ExitOK: the command did what it was asked.
	ExitOK = 0
	// ExitError: any failure not listed below (a missing file, a
	// rejected token, a node that fails to start).
	ExitError = 1
	// ExitUsage: the command line is wrong (unknown command or flag, a
	// bad flag value, a missing argument or required flag).
	ExitUsage = 2
	// ExitBusy: another holder has the resource (client.ErrBusy), or
	// other contenders' votes split every round until --wait ran out.
	ExitBusy = 3
	// ExitNoQuorum: fewer than 2f+1 nodes answered (client.ErrNotEnoughNodes),
	// or a lock's lease was lost because its renewals did not get through.
	ExitNoQuorum = 4
	// ExitRefused: the request is not allowed: the identity is not a
	// client of the cluster (by --cluster, or because more than f nodes
	// dropped its connections, whatever --cluster says:
	// client.NotAdmitted), the resource is outside its patterns, more
	// than f nodes refused it (unauthorised, wrong cluster, not the
	// holder), or the token names another holder (client.ErrRefused,
	// client.ErrNotHolder).
	ExitRefused = 5
	// ExitBadProof: "palisade fork" was given a file that does not prove
	// a fork of the cluster (malformed, not two tokens that fork, another
	// cluster's, or a signature that does not verify).
	ExitBadProof = 6
	// ExitConvicted: "palisade forensics" found vote certificates of two
	// holders at one (resource, epoch) and proved that members signed
	// votes for both (it prints each with its two signed votes).
	ExitConvicted = 7
	// ExitForkUnnamed: "palisade forensics" found two certified tokens of
	// one (resource, epoch) for two holders, a fork it showed to every
	// member, but not the certificates that would name its culprits.
	ExitForkUnnamed = 8
)

// exitCodes documents the statuses in "palisade help" and the README.
const exitCodes = `Exit status:
    0  ok
    1  other error
    2  usage: unknown command or flag, bad flag value, missing argument
    3  busy: another holder has the resource
    4  not enough nodes answered (fewer than 2f+1), or lock's lease was lost
    5  refused or unauthorised: identity not a client (of the nodes, whatever
       --cluster says), resource outside its patterns, nodes refused, token
       of another holder
    6  palisade fork: the file does not prove a fork of the cluster
    7  palisade forensics: members proven to have voted for two holders
    8  palisade forensics: a fork proven by its tokens, its culprits not named
palisade lock exits with COMMAND's status when it ran to its end.
`

// exitError gives an error the exit status of the failure it reports,
// where the command knows it best (a check before anything is sent).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// refusedf reports a request palisade will not send because the cluster
// file does not allow it: exit status ExitRefused.
func refusedf(format string, args ...any) error {
	return &exitError{code: ExitRefused, err: fmt.Errorf(format, args...)}
}

// commandExit is the exit status of the command palisade lock ran: Run
// exits with it and prints nothing (the command spoke for itself).
type commandExit struct{ code int }

func (e *commandExit) Error() string { return fmt.Sprintf("command exited with status %d", e.code) }

// ExitCode returns the exit status for the error a command returned: nil
// is ExitOK; the checks go from the most specific to the least.
func ExitCode(err error) int {
	var ce *commandExit
	var ee *exitError
	var ue errUsage
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ce):
		return ce.code
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, &ue):
		return ExitUsage
	case errors.Is(err, client.ErrRefused), errors.Is(err, client.ErrNotHolder), client.NotAdmitted(err):
		// NotAdmitted before ErrNotEnoughNodes, which it also is: nodes
		// that turn the identity away are not an outage to retry.
		return ExitRefused
	case errors.Is(err, client.ErrBusy), contended(err):
		return ExitBusy
	case errors.Is(err, client.ErrNotEnoughNodes), errors.Is(err, client.ErrLost), errors.Is(err, errNotEnoughNodes):
		return ExitNoQuorum
	}
	return ExitError
}

// contended reports a round that failed only on busy answers: other
// contenders' votes split it, every node answered. That is a busy
// resource, not missing nodes.
func contended(err error) bool {
	var qe *client.QuorumError
	if !errors.As(err, &qe) || len(qe.Nodes) == 0 {
		return false
	}
	for _, n := range qe.Nodes {
		if nodeReason(n.Err) != reasonBusy {
			return false
		}
	}
	return true
}
