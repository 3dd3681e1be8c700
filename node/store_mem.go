package node

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
)

// MemStore is an in-memory VoteStore, for tests only: nothing survives the
// process, so it does not give S3.
//
// Otherwise it behaves as BoltStore does: it stores records and audit
// entries in their JSON encoding, so it accepts and rejects the same values,
// hands back the same normalised times (no monotonic reading) and never
// lets a caller alias stored state (the Certified token pointer included).
type MemStore struct {
	mu      sync.Mutex
	closed  bool
	records map[string][]byte
	audit   [][]byte // audit[i] is the entry with Seq i+1
}

var _ VoteStore = (*MemStore)(nil)

// NewMemStore returns an empty in-memory store. Tests only.
func NewMemStore() *MemStore {
	return &MemStore{records: make(map[string][]byte)}
}

// Load returns the record of resource; ok is false if there is none.
func (m *MemStore) Load(ctx context.Context, resource string) (Record, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return Record{}, false, ErrStoreClosed
	}
	if err := ctx.Err(); err != nil {
		return Record{}, false, fmt.Errorf("node: mem store: load: %w", err)
	}
	v, ok := m.records[resource]
	if !ok {
		return Record{}, false, nil
	}
	var rec Record
	if err := json.Unmarshal(v, &rec); err != nil {
		return Record{}, false, fmt.Errorf("node: mem store: load %q: %w", resource, err)
	}
	return rec, true, nil
}

// Save writes rec and appends the audit entries, assigning their Seq, all or
// nothing. A Save with a done ctx writes nothing.
func (m *MemStore) Save(ctx context.Context, rec Record, audit ...AuditEntry) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrStoreClosed
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("node: mem store: save: %w", err)
	}
	value, err := recordJSON(rec)
	if err != nil {
		return fmt.Errorf("node: mem store: save: %w", err)
	}
	entries, err := auditJSONs(audit, uint64(len(m.audit))+1)
	if err != nil {
		return fmt.Errorf("node: mem store: save: %w", err)
	}
	m.records[rec.Resource] = value
	m.audit = append(m.audit, entries...)
	return nil
}

// Audit returns up to limit audit entries with Seq >= from, in order. A
// limit below 1 returns no entries.
func (m *MemStore) Audit(ctx context.Context, from uint64, limit int) ([]AuditEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrStoreClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("node: mem store: audit: %w", err)
	}
	if limit < 1 {
		return nil, nil
	}
	if from == 0 {
		from = 1
	}
	var out []AuditEntry
	for i := from - 1; i < uint64(len(m.audit)) && len(out) < limit; i++ {
		var e AuditEntry
		if err := json.Unmarshal(m.audit[i], &e); err != nil {
			return nil, fmt.Errorf("node: mem store: audit: entry %d: %w", i+1, err)
		}
		out = append(out, e)
	}
	return out, nil
}

// Close releases the store; every later call returns ErrStoreClosed, except
// Close, which returns nil.
func (m *MemStore) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return nil
}

// Crash simulates the process dying and restarting on the same storage: m
// is closed (every later call returns ErrStoreClosed) and the returned store
// holds exactly what m held, that is every Save that returned nil. A Save
// never lands half way, as with BoltStore. Crash works on a closed store
// too, to restart after Close.
func (m *MemStore) Crash() *MemStore {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	n := &MemStore{
		records: make(map[string][]byte, len(m.records)),
		audit:   append([][]byte(nil), m.audit...),
	}
	for k, v := range m.records {
		n.records[k] = v // values are never modified in place
	}
	return n
}
