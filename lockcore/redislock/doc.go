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
// with that context is ErrReentrant rather than a wait for itself. A lock
// is a key on one Redis (the client's address and logical database): the
// same key on another server or database is another lock.
//
// README.md in this directory has the details: what it guarantees
// (atomic release and extend, fences that survive a Redis that loses every
// key, loss detection, waiting without polling, how long a dead waiter
// blocks a key, FailOpen), what a failover can break, the key layout on
// Redis Cluster, the metrics, and the go-redis client settings it needs:
// create the client with ContextTimeoutEnabled: true.
package redislock
