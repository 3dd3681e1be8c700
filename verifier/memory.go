package verifier

import (
	"context"
	"slices"
	"sync"

	"github.com/palisade-dev/palisade/protocol"
)

// MemoryStore is a BarrierStore in memory, for tests only: its barriers do
// not survive a restart, so it does not give S4. One mutex serialises every
// call; a guarded write's changes are buffered and applied only if the write
// returns nil. It keeps fork records (ForkLister) in memory too.
type MemoryStore struct {
	mu       sync.Mutex
	closed   bool
	barriers map[string]barrierRecord
	data     map[string]map[string][]byte
	forks    map[string]map[uint64]protocol.Fork
}

var (
	_ BarrierStore = (*MemoryStore)(nil)
	_ ForkLister   = (*MemoryStore)(nil)
)

// NewMemoryStore returns an empty in-memory store, for tests only.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{
		barriers: map[string]barrierRecord{},
		data:     map[string]map[string][]byte{},
		forks:    map[string]map[uint64]protocol.Fork{},
	}
}

// Barrier implements BarrierStore.
func (m *MemoryStore) Barrier(ctx context.Context, resource string) (uint64, bool, error) {
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return 0, false, ErrClosed
	}
	b, ok := m.barriers[resource]
	return b.epoch, ok, nil
}

// Forks implements ForkLister.
func (m *MemoryStore) Forks(ctx context.Context, resource string) ([]protocol.Fork, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	kept := m.forks[resource]
	epochs := make([]uint64, 0, len(kept))
	for e := range kept {
		epochs = append(epochs, e)
	}
	slices.Sort(epochs)
	out := make([]protocol.Fork, 0, len(epochs))
	for _, e := range epochs {
		out = append(out, kept[e])
	}
	return out, nil
}

// Guard implements BarrierStore.
func (m *MemoryStore) Guard(ctx context.Context, adm Admission, write func(tx Tx) error) error {
	if err := checkGuardArgs(ctx, adm); err != nil {
		return err
	}
	resource, epoch := adm.resource, adm.epoch
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	// S4: admit only epoch >= barrier, and at the barrier only its
	// holder; raise the barrier below, together with the buffered writes,
	// under the same mutex.
	rec, ok := m.barriers[resource]
	v, err := judge(adm, rec, ok)
	if fe, isFork := asFork(err); isFork {
		fe.Kept = m.keepFork(resource, fe.Fork)
		return fe
	}
	if err != nil {
		return err
	}
	tx := &memTx{base: m.data[resource], pending: map[string][]byte{}}
	if write != nil {
		err := func() error {
			defer func() { tx.done = true }()
			return write(tx)
		}()
		if err != nil {
			return wrapWriteErr(resource, epoch, err)
		}
	}
	// The commit below cannot fail or be interrupted; ctx can still stop
	// the write until here, as on the durable stores.
	if err := ctx.Err(); err != nil {
		return cancelledBeforeCommit(resource, epoch, err)
	}
	if len(tx.pending) > 0 {
		d := m.data[resource]
		if d == nil {
			d = map[string][]byte{}
			m.data[resource] = d
		}
		for k, v := range tx.pending {
			if v == nil {
				delete(d, k)
			} else {
				d[k] = v
			}
		}
		if len(d) == 0 {
			delete(m.data, resource)
		}
	}
	if v != keepRecord {
		m.barriers[resource] = barrierRecord{epoch: epoch, token: adm.token}
	}
	return nil
}

// keepFork stores f as the fork record of its epoch unless one is kept
// there already or the resource holds MaxForksPerResource, and reports
// whether it did.
func (m *MemoryStore) keepFork(resource string, f protocol.Fork) bool {
	kept := m.forks[resource]
	if _, dup := kept[f.Epoch()]; dup || len(kept) >= MaxForksPerResource {
		return false
	}
	if kept == nil {
		kept = map[uint64]protocol.Fork{}
		m.forks[resource] = kept
	}
	kept[f.Epoch()] = f
	return true
}

// Close implements BarrierStore.
func (m *MemoryStore) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return nil
}

// memTx buffers writes over a resource's committed data. In pending, a nil
// value is a delete and a non-nil (possibly empty) value a put.
type memTx struct {
	base    map[string][]byte
	pending map[string][]byte
	done    bool
}

func (t *memTx) check(key string) error {
	if t.done {
		return errTxDone
	}
	if key == "" {
		return errEmptyKey
	}
	return nil
}

func (t *memTx) Get(key string) ([]byte, bool, error) {
	if err := t.check(key); err != nil {
		return nil, false, err
	}
	v, ok := t.pending[key]
	if !ok {
		v, ok = t.base[key]
	}
	if !ok || v == nil {
		return nil, false, nil
	}
	return append([]byte{}, v...), true, nil
}

func (t *memTx) Put(key string, value []byte) error {
	if err := t.check(key); err != nil {
		return err
	}
	t.pending[key] = append([]byte{}, value...)
	return nil
}

func (t *memTx) Delete(key string) error {
	if err := t.check(key); err != nil {
		return err
	}
	t.pending[key] = nil
	return nil
}
