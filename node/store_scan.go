package node

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// recordScanner is a VoteStore that can list its records in resource name
// order (BoltStore and MemStore can): what Locks reads.
type recordScanner interface {
	// ScanRecords calls fn for the records whose resource sorts
	// (bytewise) after after, in order, looking at most max records; fn
	// returning false stops it. last is the last resource looked at;
	// more reports that records after last remain (false: the scan
	// reached the end).
	ScanRecords(ctx context.Context, after string, max int, fn func(Record) bool) (last string, more bool, err error)
}

var (
	_ recordScanner  = (*BoltStore)(nil)
	_ recordScanner  = (*MemStore)(nil)
	_ auditSequencer = (*BoltStore)(nil)
	_ auditSequencer = (*MemStore)(nil)
)

// ScanRecords implements recordScanner in one read transaction.
func (s *BoltStore) ScanRecords(ctx context.Context, after string, max int, fn func(Record) bool) (last string, more bool, err error) {
	if s.closed.Load() {
		return "", false, ErrStoreClosed
	}
	if err := ctx.Err(); err != nil {
		return "", false, fmt.Errorf("node: bolt store: scan: %w", err)
	}
	if err := s.flush(ctx); err != nil {
		return "", false, err
	}
	err = s.db.View(func(tx *bbolt.Tx) error {
		c := tx.Bucket(boltBucketRecords).Cursor()
		k, v := c.Seek([]byte(after))
		if k != nil && after != "" && bytes.Equal(k, []byte(after)) {
			k, v = c.Next()
		}
		for seen := 0; k != nil; k, v = c.Next() {
			if seen == max {
				more = true
				return nil
			}
			seen++
			last = string(k)
			var rec Record
			if err := json.Unmarshal(v, &rec); err != nil {
				return fmt.Errorf("record %q: %w", k, err)
			}
			if !fn(rec) {
				more = true
				if k2, _ := c.Next(); k2 == nil {
					more = false
				}
				return nil
			}
		}
		return nil
	})
	if errors.Is(err, bolterrors.ErrDatabaseNotOpen) {
		return "", false, ErrStoreClosed
	}
	if err != nil {
		return "", false, fmt.Errorf("node: bolt store: scan: %w", err)
	}
	return last, more, nil
}

// AuditSequence returns the audit counter: the last sequence number the
// store assigned.
func (s *BoltStore) AuditSequence(ctx context.Context) (uint64, error) {
	if s.closed.Load() {
		return 0, ErrStoreClosed
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("node: bolt store: audit sequence: %w", err)
	}
	if err := s.flush(ctx); err != nil {
		return 0, err
	}
	var seq uint64
	err := s.db.View(func(tx *bbolt.Tx) error {
		seq = tx.Bucket(boltBucketAudit).Sequence()
		return nil
	})
	if errors.Is(err, bolterrors.ErrDatabaseNotOpen) {
		return 0, ErrStoreClosed
	}
	if err != nil {
		return 0, fmt.Errorf("node: bolt store: audit sequence: %w", err)
	}
	return seq, nil
}

// ScanRecords implements recordScanner. It sorts the store's keys on each
// call: tests only.
func (m *MemStore) ScanRecords(ctx context.Context, after string, max int, fn func(Record) bool) (last string, more bool, err error) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return "", false, ErrStoreClosed
	}
	if err := ctx.Err(); err != nil {
		m.mu.Unlock()
		return "", false, fmt.Errorf("node: mem store: scan: %w", err)
	}
	keys := make([]string, 0, len(m.records))
	for k := range m.records {
		if k > after {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	if len(keys) > max {
		keys, more = keys[:max], true
	}
	recs := make([]Record, 0, len(keys))
	for _, k := range keys {
		var rec Record
		if err := json.Unmarshal(m.records[k], &rec); err != nil {
			m.mu.Unlock()
			return "", false, fmt.Errorf("node: mem store: scan %q: %w", k, err)
		}
		recs = append(recs, rec)
	}
	m.mu.Unlock()
	for i, rec := range recs {
		last = rec.Resource
		if !fn(rec) {
			return last, more || i < len(recs)-1, nil
		}
	}
	return last, more, nil
}

// AuditSequence returns the audit counter: the last sequence number the
// store assigned.
func (m *MemStore) AuditSequence(ctx context.Context) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return 0, ErrStoreClosed
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("node: mem store: audit sequence: %w", err)
	}
	return uint64(len(m.audit)), nil
}
