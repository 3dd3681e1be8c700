// Package verifier is what a resource embeds to check Palisade fencing
// tokens. It imports only the standard library, packages protocol and crypto,
// and go.etcd.io/bbolt: never libp2p or the node, so a database, a bucket
// server or a job runner can check tokens offline with nothing but the
// cluster file.
//
// # The S4 rule
//
// A resource admits a request only if
//
//  1. the token is valid: it names this cluster, its fields are well formed,
//     and its threshold signature verifies under the group public key
//     ([Verifier.Verify]);
//  2. the token is for this resource ([Verifier.VerifyFor]);
//  3. its epoch is not below the resource's barrier, the highest epoch the
//     resource has admitted ([BarrierStore.Guard]).
//
// An epoch above the barrier raises the barrier in the same atomic
// transaction as the write the token guards: both commit or neither does, and
// the barrier survives restarts. An equal epoch is the same holder (at most one
// valid token exists per resource and epoch), so a holder may write many times
// with one token. A paused or partitioned ex-holder that wakes up with an old
// token is refused with [ErrStale] as soon as any newer holder has been
// admitted: safety never depends on clocks or leases.
//
// # Embedding
//
// Load the verifier from the cluster file, open a durable barrier store, and
// either call [Fence.Admit] around each guarded write:
//
//	v, err := verifier.Load("cluster.json")
//	store, err := verifier.OpenBoltStore("barriers.db")
//	fence := verifier.NewFence(v, store)
//	err = fence.Admit(ctx, tok, "orders-db", func(tx verifier.Tx) error {
//		return tx.Put("row/42", value)
//	})
//	if errors.Is(err, verifier.ErrStale) { /* a newer holder exists */ }
//
// or wrap an HTTP handler with [Fence.Middleware], which reads the token
// from the [HeaderToken] header and runs the handler inside the guarded
// transaction:
//
//	http.Handle("/", fence.Middleware(resourceOf, handler))
//
// The write runs against [Tx], a small key-value space per resource that
// commits atomically with the barrier. A resource that keeps its data
// elsewhere must make that data and the barrier commit together, for example
// by storing the barrier in its own database ([BoltStore.Update] gives native
// bbolt access in the same transaction); raising the barrier in one store and
// writing in another is not fencing.
//
// # Stores
//
// [OpenBoltStore] is the embedded durable default (bbolt, fsync on every
// commit). [NewMemoryStore] is for tests only. Every store passes the
// conformance suite in package verifier/barriertest; new stores (SQL) should
// run it too.
package verifier
