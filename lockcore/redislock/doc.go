// Package redislock is seed 002's session mutex on Redis: a single-writer
// rule per conversation, one brain execution at a time for the key
// sesslock:{tenant}:{agent}:{customer}:{channel}.
//
// # Using it
//
//	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
//	locker := redislock.New(rdb, redislock.Options{}) // prefix "sesslock:", TTL 30s, wait 5s
//	defer locker.Close()
//
//	key := redislock.SessionKey(tenant, agent, customer, channel)
//	err := locker.With(ctx, key, func(ctx context.Context) error {
//		return processTurn(ctx, msg) // extended while it runs; ctx cancelled if the hold is lost
//	})
//	if errors.Is(err, redislock.ErrTimeout) { /* busy: queue, answer "please wait", retry */ }
//
// For a hold that spans the steps of a workflow (the seed's
// LogicalTurnWorkflow), Acquire in step 1 with lockcore.TTL(300*time.Second), keep
// lock.Token() in the workflow state, and in the commit or failure step
// Resume(ctx, key, token) and Release. Acquire never extends a hold by
// itself: the TTL is the safety net that frees a conversation whose worker
// died. Extend sets the time left; With extends every third of the TTL.
// TryAcquire (and TryWith) is a single try; lockcore.Wait(d) sets one
// Acquire's wait. The package follows the lock family's contract
// (lockcore's package doc): its errors match lockcore's sentinels, a Lock is
// a lockcore.Hold, and a hold's context carries the key, so taking it again
// with that context is ErrReentrant rather than a wait for itself.
//
// # What it guarantees
//
//   - Release and Extend act only if the token still holds the key, in one
//     atomic step (a Lua script): a late release after the TTL returns
//     ErrNotHeld and deletes nothing, where the seed's bare DELETE removed
//     the next holder's lock.
//   - Every grant carries a fence, strictly greater than every earlier
//     grant's for that key, across release, expiry, force release and
//     hand-over. Fences come from one counter per Redis Cluster hash slot (at
//     most 16,384 keys, never one per lock), and never fall below the
//     server's clock in microseconds, so a counter lost to a flush, to a
//     restart of a Redis that keeps nothing (no RDB or AOF) or lost what
//     came after its last snapshot, or to a failover does not hand out
//     old numbers again (if the clock of the server that comes back is
//     not behind). Fences do not rest on persistence: they survive a
//     crash or restart that loses every key, by that clock floor alone.
//   - A hold knows when it is lost: its Context is cancelled with cause
//     ErrLost (Done closes, Err wraps ErrLost) when its TTL passes without
//     an extension (estimated on the client from a moment no later than
//     Redis set the TTL, erring early by 1% + 2ms), when an extend finds
//     the key gone or taken, when a force release is announced to its
//     Locker, or when the Locker's listener, reconnecting after Redis went
//     away, finds the key gone (a restart, a failover). The listener pings
//     a connection quiet for 3s and subscribes on a new one if no answer
//     comes within 3s more, so a half-open connection (an old primary cut
//     off in a failover) is replaced within about 6s.
//   - Waiting does not poll. Waiters register in Redis in arrival order,
//     each with a registration that lives 3s unless renewed; a release hands
//     the key to the longest live waiter in the same script and publishes a
//     notice on the waiter's Locker channel. The hand-over's grant lasts
//     only HandOverTTL (2s; the waiter's own TTL if shorter): woken by the
//     notice, the waiter polls at once, which extends the grant to its TTL,
//     so a hand-over costs about two round trips and the new holder's lease
//     is timed from its poll (never from when the notice arrived). Waiters
//     also poll as a backstop (pub/sub is fire-and-forget, and Redis
//     announces expiry late): at the holder's expiry, and at least every
//     500ms.
//   - A waiter that dies while queued (a crashed pod) blocks the key for
//     at most HandOverTTL: its registration expires 3s after its last
//     poll, and a release in those 3s hands it a grant that lapses after
//     HandOverTTL, since nobody takes it up; the next waiter then gets the
//     key at its next poll (within 500ms). A waiter whose Acquire fails or
//     is cancelled takes back its registration, or the grant, itself.
//   - ErrUnavailable (Redis unreachable, or no answer within the wait),
//     ErrLocked (a try found the key held), ErrTimeout (the key was seen
//     held for the whole wait) and
//     ErrNotHeld (the token lost the key) are distinct; a nil error always
//     comes with a Lock. With fails closed by default; Options.FailOpen runs
//     fn unprotected only on ErrUnavailable, and counts it: only when Redis
//     cannot be reached (refused or lost connections, a pool timeout, no
//     answer within the wait, too many clients). An error reply is an
//     answer from a Redis that is up, where another holder may hold the
//     key: OOM, BUSY, READONLY, LOADING, CLUSTERDOWN and every other reply
//     fail closed, with the reply wrapped in the error.
//   - A failed or cancelled Acquire takes back what it may have left (its
//     registration, or a grant that raced with the cancellation).
//
// # What a Redis failover can break
//
// Redis replicates asynchronously. If the primary fails after granting a
// lock and before the grant reached a replica, the promoted replica does not
// have the key, and a second worker gets the lock while the first still
// runs: mutual exclusion is lost. The first worker finds out when its
// Locker's listener (running during With) reconnects and checks its holds,
// or at its next extend; either way With cancels fn's context with ErrLost.
// Until then both run. Redis's TTLs
// also follow the wall clock, so a clock jump can expire a lock early. WAIT
// narrows the window but, as the Redis docs say, does not make Redis
// strongly consistent; Redlock does not fix it either (Kleppmann, "How to do
// distributed locking"). What protects the data is the fence: write it with
// the data and make the store refuse a write whose fence is lower than the
// last one it accepted. The lock makes conflicts rare; the fence makes them
// harmless.
//
// # Keys
//
// The hold is the hash Prefix+key (t token, f fence, o owner, s granted at,
// c the holder's notice channel), so EXISTS answers IsLocked. The waiter
// queue, its registrations and the fence counter begin with a hash tag
// chosen for the hold's cluster slot ("{tag}sesslock:q:KEY"), so every
// script touches one slot and the package runs unchanged on Redis Cluster.
// The seed's key template is a pattern: written literally, its braces would
// be a hash tag putting a whole tenant in one slot. Force releases are kept
// in the stream "{Prefix}audit", and each ForceRelease call's answer for a
// minute under "{tag}Prefix" + "forced:ID", so that a retried call is
// harmless. Notices use plain pub/sub, which reaches a
// subscriber on any cluster node. A *redis.Ring is not a cluster: a script
// publishes on the hold's shard while the Locker subscribes on the shard
// its channel hashes to, so there notices mostly do not arrive. Locks stay
// correct (the scripts run on the hold's shard), but waiters wait by their
// 500ms poll and a force release is found at the holder's next extend.
//
// # Observing it
//
// Options.Registerer gets seed 002's metrics:
// session_lock_acquire_duration_seconds{session_key_pattern},
// session_lock_wait_total and session_lock_failure_total{reason} with
// reason timeout, redis_error, lost or not_held; the pattern label is the
// registry's (lockcore/registry), or "other", never the key. Healthy is the
// seed's check (take and release a probe key within a second). The monitor
// lists held locks and their waiters with a reader of its own
// (locktop's internal/source/redislocks), not through this package.
// ForceRelease is audited: who, when, why, the victim's owner, fence and
// the first 6 characters of its token (a token is a capability: it is never
// stored whole).
//
// # The client
//
// Create the go-redis client with ContextTimeoutEnabled: true. Without it
// go-redis lets a command outlive its context's deadline (it waits for
// ReadTimeout), so on a Redis that hangs the wait, the health check's
// second and the extender's deadlines would not hold. go-redis retries a
// command after a network error; a release whose reply was lost and which
// was retried reports ErrNotHeld although it released (a ForceRelease
// retried so does nothing the second time).
// After PoolSize failed dials, go-redis stops dialling and answers with the
// last dial error until a probe it makes every second gets through, so
// calls keep returning ErrUnavailable for up to about a second after Redis
// is back.
//
// Redis 8.4's DELEX IFEQ / SET IFEQ could replace the compare-and-delete
// and compare-and-extend scripts, but the release here also hands the key
// to the next waiter and mints its fence in the same step, which no single
// command does, and Redis 7 has neither.
package redislock
