package node

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// Errors of ReadAudit.
var (
	// ErrStoreLocked reports a vote store held open by another process:
	// its node is running (bbolt allows one writer process per file).
	ErrStoreLocked = errors.New("node: the vote store is locked by another process (is the node running?)")
	// ErrAuditBroken reports an audit log whose sequence numbers do not
	// run 1, 2, 3, … without a gap up to the store's counter, or an
	// entry that does not decode or carries another sequence number than
	// its key.
	ErrAuditBroken = errors.New("node: audit log is broken")
)

// auditLockWait is how long ReadAudit waits for the store's file lock.
const auditLockWait = 500 * time.Millisecond

// AuditSummary is what ReadAudit found.
type AuditSummary struct {
	// Entries is the number of entries read.
	Entries uint64
	// Sequence is the store's audit counter: the last sequence number it
	// assigned. A whole log has entries 1..Sequence.
	Sequence uint64
	// Problems lists each gap or broken entry, in log order.
	Problems []string
}

// Err returns nil for a whole log, else an error matching ErrAuditBroken
// that names the first problems.
func (s AuditSummary) Err() error {
	switch len(s.Problems) {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("%w: %s", ErrAuditBroken, s.Problems[0])
	default:
		return fmt.Errorf("%w: %s (and %d more problems)", ErrAuditBroken, s.Problems[0], len(s.Problems)-1)
	}
}

// ReadAudit reads the audit log of a stopped node's directory, opening
// its vote store read-only, and calls fn for each entry in sequence order
// (an fn error stops it). It checks the sequence as it goes: the numbers
// must run from 1 without a gap up to the store's counter, and each entry
// must decode and carry its own key's number; each deviation is listed in
// the summary (see AuditSummary.Err), and entries that do not decode are
// not passed to fn.
//
// A running node holds the store's lock: ReadAudit then returns an error
// matching ErrStoreLocked after a short wait. A running node's log is read
// through its admin API instead (FetchAudit), which serves the same
// entries from the open store.
func ReadAudit(dir string, fn func(AuditEntry) error) (AuditSummary, error) {
	path := filepath.Join(dir, StoreFileName)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return AuditSummary{}, fmt.Errorf("node: audit: %s has no vote store (has the node run yet?): %w", dir, err)
	} else if err != nil {
		return AuditSummary{}, fmt.Errorf("node: audit: %w", err)
	}
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: auditLockWait})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return AuditSummary{}, fmt.Errorf("%w: %s is in use; stop the node to read its audit log, or read it from the running node's admin API (palisade audit --admin ADDR --dir DIR)", ErrStoreLocked, path)
	}
	if err != nil {
		return AuditSummary{}, fmt.Errorf("node: audit: open %s: %w", path, err)
	}
	defer db.Close()
	var chk auditCheck
	err = db.View(func(tx *bbolt.Tx) error {
		b := tx.Bucket(boltBucketAudit)
		if b == nil {
			return nil // a store that never saved anything
		}
		// Entries a crash left in the store's write-ahead log follow
		// those of the file (the node moves them in when it next opens).
		logged, err := loggedAudit(path, tx.Bucket(boltBucketMeta))
		if err != nil {
			return err
		}
		sequence := b.Sequence()
		c := b.Cursor()
		for k, v := c.First(); ; k, v = c.Next() {
			if k == nil {
				if len(logged) == 0 {
					break
				}
				k, v, sequence = seqKey(logged[0].seq), logged[0].value, max(sequence, logged[0].seq)
				logged = logged[1:]
			}
			if len(k) != 8 {
				chk.sum.Problems = append(chk.sum.Problems, fmt.Sprintf("a key of %d bytes, not a sequence number", len(k)))
				continue
			}
			seq := binary.BigEndian.Uint64(k)
			var e AuditEntry
			if err := json.Unmarshal(v, &e); err != nil {
				chk.order(seq)
				chk.sum.Problems = append(chk.sum.Problems, fmt.Sprintf("entry %d does not decode: %v", seq, err))
				continue
			}
			if !chk.entry(seq, e) {
				continue
			}
			if err := fn(e); err != nil {
				return err
			}
		}
		chk.finish(sequence)
		return nil
	})
	sum := chk.sum
	if err != nil {
		return sum, fmt.Errorf("node: audit: %w", err)
	}
	return sum, nil
}

// auditCheck checks an audit log's sequence as its entries go by, in key
// order: numbers must run from 1 without a gap up to the store's counter,
// and each entry must carry its own key's number. ReadAudit (keys from the
// store) and FetchAudit (entries from the admin API, keyed by their Seq)
// share it.
type auditCheck struct {
	sum  AuditSummary
	next uint64 // the sequence number expected next, less 1 before the first
}

// order notes sequence number seq in the key order, listing a gap or a
// number out of order.
func (c *auditCheck) order(seq uint64) {
	if c.next == 0 {
		c.next = 1
	}
	switch {
	case seq > c.next:
		c.sum.Problems = append(c.sum.Problems, gap(c.next, seq-1))
	case seq < c.next:
		c.sum.Problems = append(c.sum.Problems, fmt.Sprintf("entry %d is out of order (after %d)", seq, c.next-1))
	}
	c.next = max(c.next, seq+1)
}

// entry notes a decoded entry under key seq and reports whether it counts
// (it always does once decoded; the number is checked).
func (c *auditCheck) entry(seq uint64, e AuditEntry) bool {
	c.order(seq)
	if e.Seq != seq {
		c.sum.Problems = append(c.sum.Problems, fmt.Sprintf("entry %d carries sequence number %d", seq, e.Seq))
	}
	c.sum.Entries++
	return true
}

// finish checks the end of the log against the store's counter.
func (c *auditCheck) finish(sequence uint64) {
	c.sum.Sequence = sequence
	next := max(c.next, 1)
	if next <= sequence {
		c.sum.Problems = append(c.sum.Problems, gap(next, sequence)+" (at the end)")
	}
	if next-1 > sequence {
		c.sum.Problems = append(c.sum.Problems, fmt.Sprintf("entries run to %d, past the store's counter %d", next-1, sequence))
	}
}

func gap(from, to uint64) string {
	if from == to {
		return fmt.Sprintf("gap: entry %d is missing", from)
	}
	return fmt.Sprintf("gap: entries %d to %d are missing", from, to)
}
