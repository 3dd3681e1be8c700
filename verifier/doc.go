// Package verifier is what a resource embeds to check Palisade fencing
// tokens. It imports only the standard library, packages protocol and crypto,
// go.etcd.io/bbolt and its own subpackages: never libp2p or the node, so a
// database, a bucket server or a job runner can check tokens offline with
// nothing but the cluster file.
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
// Steps 1 and 2 yield an [Admission] ([Verifier.Admit]); step 3 takes one.
// The barrier stores accept nothing else, never a raw epoch, so no guarded
// write, not even one in the application's own native transaction, can
// run for a token that was not verified.
//
// An epoch above the barrier raises the barrier in the same atomic
// transaction as the write the token guards: both commit or neither does, and
// the barrier survives restarts. An equal epoch is admitted for the holder
// whose token set the barrier, so a holder may write many times with one
// token. A paused or partitioned ex-holder that wakes up with an old
// token is refused with [ErrStale] as soon as any newer holder has been
// admitted: safety never depends on clocks or leases.
//
// # Forks
//
// At most one valid token exists per resource and epoch while at most f
// nodes misbehave (S1). Beyond that (f+1 colluding nodes, or nodes
// restored from old copies of their vote stores) two holders can get
// valid tokens for one epoch: a fork. The stores keep the token that set
// the barrier, and refuse another holder's token at the same epoch with
// a *[ForkError] ([ErrFork]) whose protocol.Fork holds both tokens, a
// proof anyone with the cluster file can check (protocol.VerifyFork).
// The first proof per resource and epoch is kept as a fork record
// ([ForkLister]; at most [MaxForksPerResource] per resource). A resource
// that never sees the second token cannot refuse it.
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
//	if errors.Is(err, verifier.ErrOutcomeUnknown) { /* read before retrying */ }
//
// or wrap an HTTP handler with [Fence.Middleware], which reads the token
// from the [HeaderToken] header and runs the handler inside the guarded
// transaction:
//
//	http.Handle("/", fence.Middleware(resourceOf, handler))
//
// The write runs against [Tx], a small key-value space per resource that
// commits atomically with the barrier.
//
// # What a resource must do
//
// A token protects nothing until the resource checks it, and checks it at
// the moment it applies the write. For every guarded request a resource
// must verify the token for itself ([Verifier.VerifyFor], a pure check that
// may run first) and then, in one atomic transaction:
//
//  1. check the token's epoch against the barrier, refusing a lower one;
//  2. raise the barrier to the epoch if it is higher;
//  3. apply the write;
//  4. commit barrier and write together, durably (fsync), or neither.
//
// [Fence.Admit], [Fence.Middleware] and [BarrierStore.Guard] do steps 1–4
// in one store transaction. A resource that keeps its data elsewhere must
// make that data and the barrier commit together: keep the barrier in the
// same database and use the store's native transaction ([BoltStore.Update]
// for bbolt, [SQLStore.Update] for SQL databases), with the Admission that
// verification returned:
//
//	adm, err := v.Admit(tok, "orders-db") // or v.VerifyRequest in proof mode
//	if err != nil { /* refuse the request */ }
//	err = store.Update(ctx, adm, func(stx *sql.Tx, _ verifier.Tx) error {
//		_, err := stx.ExecContext(ctx, "UPDATE orders SET state = ? WHERE id = 42", state)
//		return err
//	})
//
// Raising the barrier in one store and writing in another, or checking
// the barrier and writing later, is not fencing: a stale holder can slip
// in between.
//
// # Proof of possession
//
// A token is a bearer credential: whoever has its text can present it. A
// resource that must refuse a leaked token runs its verifier in proof mode
// ([RequireProof]): then every request must also carry the holder's
// signature over the request ([Verifier.VerifyRequest], [Fence.AdmitRequest],
// [Fence.Middleware]). The proof's format, the client side and the bounded
// replay record are package verifier/pop.
//
// # Cancellation and unknown outcomes
//
// A failed guarded write changes nothing: barrier and data stay as they
// were. The caller's context can stop a write up to its commit, never
// during it: every store checks the context once more just before it
// commits, and then commits detached from it ([SQLStore] under its own
// [SQLStore.CommitTimeout], [DefaultCommitTimeout] by default), so a
// deadline that expires mid-commit cannot turn a committed write into a
// reported failure. A write cancelled before its commit returns an error
// wrapping the context's error.
//
// One case is left where the store cannot know: the commit was sent and
// then the connection was lost, the commit timed out, or the disk failed
// during the fsync. The write may or may not have committed, and the error
// wraps [ErrOutcomeUnknown]. Branch on it: read the resource (at the same
// epoch) before retrying a write that is not idempotent. [Fence.Middleware]
// answers it with 503 and [HeaderOutcome] set to [OutcomeUnknown]; a client
// that disconnects before the commit stops the write, one that disconnects
// during it does not.
//
// # Choosing a store
//
//   - [SQLStore]: the resource already runs PostgreSQL or SQLite. The
//     barrier lives in a table (created by [NewSQLStore]) and
//     [SQLStore.Update] gives the *sql.Tx, so the application's own
//     statements commit with the barrier. A conditional upsert of the
//     barrier row decides stale or admitted and locks the row, so racing
//     writers are serialised. The application imports the driver (for
//     example modernc.org/sqlite or github.com/jackc/pgx/v5/stdlib);
//     this package imports none.
//   - [BoltStore]: an embedded store with no server, the default for a
//     resource without a database ([OpenBoltStore]; fsync on every commit).
//     "palisade resource" is built on it.
//   - [NewMemoryStore]: tests only; its barriers do not survive a restart.
//
// Tests and examples get a cluster and its tokens from package
// verifier/verifiertest (a trusted dealer: never outside tests).
//
// Every store passes the same conformance suite, package
// verifier/barriertest: stale epochs refused, equal admitted for their
// holder and refused with the proof for another (a fork), higher raise
// the barrier together with the write, a failed write changes nothing,
// racing writers are serialised, writers cancelled at random moments leave
// no trace unless told ErrOutcomeUnknown, and barriers survive reopening.
// A new store should run it too.
//
// # Data versions
//
// A fresh token says its holder is the newest, not that it has seen the
// newest data. [PutIfVersion] and [DeleteIfVersion] add a compare-and-set on
// a per-key data version inside the guarded transaction, on every store:
// [GetVersioned] returns the value and its version; a write that expects
// another version fails with a *[VersionError] ([ErrVersionMismatch]).
// Return that error from the write function and the whole transaction rolls
// back, so the barrier is not raised either. Versions never repeat within a
// resource, even after a delete.
package verifier
