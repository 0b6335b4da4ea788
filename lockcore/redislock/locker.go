package redislock

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/lockcore/internal/alarm"
	"github.com/locktop/locktop/lockcore/registry"
	"github.com/redis/go-redis/v9"
)

// Locker takes session locks on one Redis (or Redis Cluster). It is safe
// for concurrent use. Call Close when done with it: waiting and With start
// a listener for hand-over notices, which Close stops.
type Locker struct {
	rdb      redis.UniversalClient
	store    string // the Redis rdb talks to, as the held set names it (storeOf)
	prefix   string
	owner    string
	ttl      time.Duration
	wait     time.Duration
	failOpen bool
	log      *slog.Logger
	channel  string // this Locker's notice channel
	m        *metrics
	count    counters
	// args are the acquire script's arguments that most acquires send
	// alike, made interfaces once: go-redis takes ...any, and a string or
	// an int64 made one is an allocation per argument and call.
	args struct{ owner, channel, ttl any }

	mu      sync.Mutex
	waiters map[string]chan notice // token -> its waiting Acquire: a hand-over, or poll now
	holds   map[string][]*Lock     // token -> its watched Locks (one, or more if resumed here), for revocation notices
	revoked revocations            // revocation notices that found no watched hold (yet)
	lis     *listener
	users   int         // callers that want the listener now
	linger  *time.Timer // stops an unused listener
	// epoch is the listener's latest confirmed subscription (0: no
	// listener, or none confirmed yet); every confirmation, the first or
	// one after a dropped connection, gets a new number. A hold granted
	// and watched under the same epoch was told of every notice about it
	// (a dropped connection is followed by a new epoch, whose check covers
	// the holds watched by then); any other hold may have missed one, and
	// is checked in Redis (Lock.watch).
	epoch  uint64
	epochs uint64 // the last epoch handed out

	waits alarm.Waits // bounds the acquires' waits
}

// New returns a Locker on rdb (a *redis.Client, *redis.ClusterClient, ...;
// on a *redis.Ring notices mostly do not arrive: see the package docs).
// It sends nothing to Redis until used.
func New(rdb redis.UniversalClient, opts Options) *Locker {
	opts = opts.withDefaults()
	l := &Locker{
		rdb: rdb, store: storeOf(rdb), prefix: opts.Prefix, owner: opts.Owner, ttl: opts.TTL, wait: opts.Wait,
		failOpen: opts.FailOpen, log: opts.Logger,
		// The channel is a word: waiter registrations and notices are
		// space-separated, so a prefix with a space must not split it.
		channel: strings.Join(strings.Fields(opts.Prefix), "_") + "notice:" + rand.Text()[:16],
		m:       newMetrics(opts.Registerer),
		waiters: map[string]chan notice{}, holds: map[string][]*Lock{}, revoked: revocations{},
	}
	l.args.owner, l.args.channel, l.args.ttl = l.owner, l.channel, ms(l.ttl)
	return l
}

// Acquire takes key (without the prefix), waiting up to the Locker's Wait
// (or Wait(d)) while another token holds it. Waiting costs no polling: a
// release hands the key to the longest waiter with a claim of HandOverTTL
// and tells it through pub/sub, with the grant's fence; the waiter returns
// on that notice, about one round trip after the release began, and takes
// the claim up to its TTL in the background (Extend waits for that
// take-up; one that finds the key gone marks the lock lost). Until
// the take-up answers, the lease is counted from the waiter's last poll,
// which Redis answered before the grant, so the estimate is never late.
// Waiters also poll as a backstop (for expiry and lost notices), at most
// every 500ms. Waiters are registered in Redis in arrival order, which
// Inspect shows.
//
// The grant lasts the Locker's TTL (or lockcore.TTL(d)); Acquire never
// extends it. It waits up to the Locker's Wait, or lockcore.Wait(d). The
// error wraps ErrTimeout when the key stayed held (and ctx's error when
// ctx ended the wait), ErrUnavailable when Redis could not be reached; a
// nil error always comes with a Lock. A failed or cancelled Acquire takes
// back what it may have left in Redis (a registration, or a grant that
// raced with the cancellation) before it returns.
func (l *Locker) Acquire(ctx context.Context, key string, opts ...lockcore.AcquireOption) (*Lock, error) {
	return l.acquire(ctx, key, true, false, opts...)
}

// TryAcquire takes key if it is free now: a single try, whatever the
// Locker's Wait (lockcore.TTL still sets the grant's TTL). A held key is an
// error wrapping ErrLocked, never a nil Lock with a nil error.
func (l *Locker) TryAcquire(ctx context.Context, key string, opts ...lockcore.AcquireOption) (*Lock, error) {
	return l.acquire(ctx, key, true, true, opts...)
}

// acquireConfig is what one Acquire does: wait 0 is a single try.
type acquireConfig struct {
	wait time.Duration
	ttl  time.Duration
}

func (l *Locker) acquire(ctx context.Context, key string, observe, try bool, opts ...lockcore.AcquireOption) (*Lock, error) {
	if key == "" {
		return nil, errors.New("redislock: empty key")
	}
	ks := keysFor(l.prefix, key)
	name := ks.hold
	if e := lockcore.Find(ctx, lockcore.KindRedis, l.store, name); e != nil && e.Hold.Err() == nil {
		return nil, fmt.Errorf("redislock: %s: %w", key, ErrReentrant)
	}
	class := registry.NameOf(registry.RedisKey, name)
	if class == "" {
		class = lockcore.KindRedis
	}
	entry, err := lockcore.Check(ctx, lockcore.KindRedis, l.store, name, class)
	if err != nil {
		return nil, fmt.Errorf("redislock: %s: %w", key, err)
	}
	c := lockcore.Resolve(opts...)
	cfg := acquireConfig{wait: cmp.Or(c.Wait, l.wait), ttl: cmp.Or(c.TTL, l.ttl)}
	if try {
		cfg.wait = 0
	}
	a := &attempt{l: l, key: key, ks: ks, tok: rand.Text(), owner: lockcore.OwnerIn(ctx, l.owner), cfg: cfg, observe: observe,
		ctx: ctx, entry: entry, start: time.Now()}
	a.wctx = ctx
	if cfg.wait > 0 {
		// Timed by the Locker's one alarm, not a timer per acquire; go-redis
		// (ContextTimeoutEnabled) cuts a command at its Deadline.
		var end func()
		a.wctx, end = l.waits.With(ctx, a.start.Add(cfg.wait))
		defer end()
	}
	var mode any = "t"
	if cfg.wait > 0 {
		mode = "w"
	}
	r, err := a.try(mode)
	if err != nil {
		return nil, a.fail(err)
	}
	if r.ok {
		return a.granted(r.fence, a.sent, r.ttl), nil
	}
	if cfg.wait <= 0 {
		return nil, a.fail(nil)
	}
	if observe {
		l.observeWait()
	}
	if f := afterRegister.get(); f != nil {
		f(ctx)
	}
	return a.await(r)
}

// attempt is one Acquire in progress.
type attempt struct {
	l       *Locker
	key     string
	ks      keyset
	tok     string
	owner   string // the Locker's, or the task's (lockcore.WithOwner)
	cfg     acquireConfig
	observe bool
	ctx     context.Context // the caller's
	entry   *lockcore.Entry // the grant's place in the held set
	wctx    context.Context // the caller's, bounded by the wait
	start   time.Time
	holder  string // the holder's owner, as last seen
	seen    bool   // Redis answered at least once
	sent    time.Time
	epoch   uint64 // the Locker's subscription when the last try was sent
	// asked and heldFence are the last try that found another token
	// holding the key: when it was sent, and the holder's fence. A
	// hand-over notice with a higher fence was granted after that try ran,
	// so after asked.
	asked     time.Time
	heldFence int64
}

// result is what acquireScript answered.
type result struct {
	ok    bool
	fence int64
	ttl   time.Duration // time left of the grant (ok), or of the holder's
}

// try runs the acquire script once. mode is the script's "t" (a single
// try) or "w" (register to wait), a constant: an interface made of a
// constant allocates nothing.
func (a *attempt) try(mode any) (result, error) {
	l := a.l
	ttl, owner := l.args.ttl, l.args.owner
	if a.cfg.ttl != l.ttl {
		ttl = ms(a.cfg.ttl)
	}
	if a.owner != l.owner {
		owner = a.owner
	}
	a.sent, a.epoch = time.Now(), l.subscription()
	v, err := acquireScript.Run(a.wctx, l.rdb, a.ks.all(), a.tok, ttl, owner, l.args.channel, mode, waiterTTLArg()).Slice()
	if err != nil {
		return result{}, err
	}
	a.seen = true
	if len(v) < 3 {
		return result{}, fmt.Errorf("redislock: unexpected reply %v", v)
	}
	ok, _ := v[0].(int64)
	pttl, _ := v[2].(int64)
	if ok == 1 {
		f, err := parseInt(v[1])
		if err != nil {
			return result{}, err
		}
		return result{ok: true, fence: f, ttl: time.Duration(pttl) * time.Millisecond}, nil
	}
	hold, _ := v[1].(int64)
	a.holder, _ = v[2].(string)
	a.asked, a.heldFence = a.sent, math.MaxInt64 // no notice is trusted without the holder's fence
	if len(v) > 3 {
		if f, err := parseInt(v[3]); err == nil {
			a.heldFence = f
		}
	}
	return result{ttl: time.Duration(hold) * time.Millisecond}, nil
}

// await waits until the key is granted. A hand-over notice granted after
// the last try (its fence above the holder's that try saw) is the grant:
// the lease is timed from that try's sending, which came before the grant,
// never from the notice, and the claim is taken up in the background. Any
// other notice (a stale one, one whose claim may be nearly gone, or a
// resubscription, after which notices may have been missed) makes it poll
// at once; the poll takes up a claim itself.
func (a *attempt) await(r result) (*Lock, error) {
	l := a.l
	ch := make(chan notice, 1)
	l.mu.Lock()
	l.waiters[a.tok] = ch
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		delete(l.waiters, a.tok)
		l.mu.Unlock()
	}()
	// A grant published before the listener is subscribed is lost: when
	// the subscription is confirmed, poll once at once.
	ready := l.listen()
	defer l.unlisten()
	select {
	case <-ready:
		ready = nil
	default:
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		timer.Reset(min(max(r.ttl, time.Millisecond), maxPoll))
		if f := awaiting.get(); f != nil && ready == nil {
			f()
		}
		select {
		case n := <-ch:
			if k := a.handedOver(n); k != nil {
				return k, nil
			}
		case <-ready:
			ready = nil
		case <-timer.C:
		case <-a.wctx.Done():
			return nil, a.fail(nil)
		}
		var err error
		r, err = a.try("w")
		if err != nil {
			return nil, a.fail(err)
		}
		if r.ok {
			return a.granted(r.fence, a.sent, r.ttl), nil
		}
	}
}

// notice is what the listener tells a waiting Acquire: a hand-over of the
// key with its fence and claim, or (grant false) poll now.
type notice struct {
	grant bool
	fence int64
	claim time.Duration
}

// handedOver returns the Lock a hand-over notice grants, or nil when the
// notice cannot be trusted as a grant made after the last try, or when
// less than half its claim would be left by the estimate: the caller polls
// then.
func (a *attempt) handedOver(n notice) *Lock {
	if !n.grant || n.fence <= a.heldFence || a.asked.IsZero() {
		return nil
	}
	if time.Until(lockcore.LocalDeadline(a.asked, n.claim)) < n.claim/2 {
		return nil
	}
	k := a.granted(n.fence, a.asked, n.claim)
	k.takeup = make(chan struct{})
	go k.takeUp(a.cfg.ttl)
	return k
}

// granted makes the Lock of a grant whose ttl was counted from no earlier
// than base.
func (a *attempt) granted(fence int64, base time.Time, ttl time.Duration) *Lock {
	l := a.l
	k := &Lock{l: l, key: a.key, ks: a.ks, token: a.tok, fence: fence, owner: a.owner, epoch: a.epoch, held: a.entry, parent: a.ctx}
	a.entry.Hold = k
	k.start(base, ttl)
	if a.observe {
		l.observeAcquire(a.key, time.Since(a.start))
	}
	return k
}

// withdraw takes back the attempt's registration, or grant, before ctx
// ends, and reports whether Redis was still busy when ctx ended. A Redis
// answering BUSY (a script past lua-time-limit), LOADING or READONLY (see
// busyReply) runs no such command now but may soon, and a registration it
// keeps is handed the key by the next release: the withdraw is tried
// again until ctx ends
// (TestAttackBusyQueuedWaiterTakesBack: a waiter's poll answered BUSY
// returned with its registration left, which the holder's release then
// made the key's holder).
//
// A try cut short by ctx after BUSY replies counts as busy: the bound can
// end while a try is on its way (TestBusyOutlastsTheCleanup failed in 2
// of 4 runs of the package under load when it did not).
func (a *attempt) withdraw(ctx context.Context) (busy bool) {
	for {
		err := withdrawScript.Run(ctx, a.l.rdb, a.ks.all(), a.tok).Err()
		if !busyReply(err) {
			return busy && err != nil && ctx.Err() != nil
		}
		busy = true
		select {
		case <-ctx.Done():
			return true
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// withdrawLate goes on taking back a registration that a Redis busy past
// the clean-up bound kept, in the background, until the registration would
// have expired by itself (waiterTTL after the last try, which came before
// now): Acquire has returned, and a release must not hand the key to a
// waiter that is gone (TestBusyOutlastsTheCleanup). ttl is waiterTTL,
// read by the Acquire before it returns, not by this goroutine after.
func (a *attempt) withdrawLate(ttl time.Duration) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(a.ctx), ttl)
	defer cancel()
	a.withdraw(ctx)
}

// readOnlyReply reports whether err is a READONLY reply: a replica
// refused a write.
func readOnlyReply(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && strings.HasPrefix(re.Error(), "READONLY")
}

// busyReply reports whether err is a BUSY, LOADING or READONLY reply:
// Redis is up but runs no command until a script ends or its dataset is
// loaded, or no write while it is a replica, which it may not stay (a
// failover that went back; a failover client finds the new primary, which
// may have the registration: TestAttackReadOnlyQueuedWaiterTakesBack).
func busyReply(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	s := re.Error()
	return strings.HasPrefix(s, "BUSY") || strings.HasPrefix(s, "LOADING") || readOnlyReply(err)
}

// fail turns the end of an attempt into its error, after taking back what
// it may have left in Redis. err is nil when the key stayed held.
//
// "Not acquired" needs Redis to have said the key is held: when no answer
// came within the wait, Redis is unavailable (too slow is unavailable too),
// so FailOpen can tell the two apart (anchors: CortexReach #879).
func (a *attempt) fail(err error) error {
	l := a.l
	// Take back what may be in Redis: always once a try has reached it (a
	// registration lives on), and after this try unless its dial was
	// refused or a replica refused it (READONLY: it wrote nothing, and a
	// take-back tried again until a primary answers would go on for every
	// acquire of a client pointed at a replica).
	if err == nil || a.seen || !refused(err) && !readOnlyReply(err) {
		// A Redis that never answered is unlikely to answer now: do not
		// make the caller wait long for it (the grant, if any, expires).
		bound := cleanupTimeout
		if !a.seen {
			bound = cleanupTimeout / 8
		}
		if beforeWithdraw != nil {
			beforeWithdraw()
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(a.ctx), bound)
		if a.withdraw(cctx) {
			go a.withdrawLate(waiterTTL)
		}
		cancel()
	}
	held := ""
	if a.holder != "" {
		held = " (held by " + a.holder + ")"
	}
	ctxErr := err != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded))
	note := func(reason string) {
		if a.observe { // the health probe is kept out of the counts
			l.observeFailure(reason)
		}
	}
	switch {
	case a.ctx.Err() != nil && (err == nil || ctxErr):
		// The caller's context ended the wait: a deadline is a timeout, a
		// cancellation is the caller's choice and no failure of the lock.
		if errors.Is(a.ctx.Err(), context.DeadlineExceeded) {
			note(ReasonTimeout)
			return fmt.Errorf("redislock: %s not acquired%s: %w", a.key, held, errors.Join(ErrTimeout, context.Cause(a.ctx)))
		}
		return fmt.Errorf("redislock: %s not acquired%s: %w", a.key, held, context.Cause(a.ctx))
	case (err == nil || ctxErr) && a.seen:
		note(ReasonTimeout) // the metric's reason for a try too (seed 002's reasons)
		if a.cfg.wait <= 0 {
			return fmt.Errorf("redislock: %s is held%s: %w", a.key, held, ErrLocked)
		}
		return fmt.Errorf("redislock: %s not acquired within %v%s: %w", a.key, a.cfg.wait, held, ErrTimeout)
	case err == nil || ctxErr:
		note(ReasonRedisError)
		return fmt.Errorf("redislock: %s: no answer from Redis within %v: %w", a.key, a.cfg.wait, ErrUnavailable)
	}
	note(ReasonRedisError)
	return l.redisError(a.key, err)
}

// beforeWithdraw, when set (by tests), runs before a failed Acquire takes
// back what it may have left.
var beforeWithdraw func()

// redisError wraps an error from Redis: ErrUnavailable when Redis could not
// answer.
func (l *Locker) redisError(key string, err error) error {
	if unavailable(err) {
		return fmt.Errorf("redislock: %s: %w: %w", key, ErrUnavailable, err)
	}
	return fmt.Errorf("redislock: %s: %w", key, err)
}

// refused reports whether err shows the request never reached Redis (the
// connection was refused): that request left nothing to take back.
func refused(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// Resume re-attaches to a hold by its token: a later workflow step (in this
// process or another) continues the hold taken in step 1. The Lock keeps
// its grant's fence, its owner and the time left; it is not extended.
// ErrNotHeld if the token no longer owns the key.
func (l *Locker) Resume(ctx context.Context, key, token string) (*Lock, error) {
	ks := keysFor(l.prefix, key)
	sent, epoch := time.Now(), l.subscription()
	fence, left, owner, err := check(ctx, l.rdb, ks, token)
	if errors.Is(err, ErrNotHeld) {
		l.observeFailure(ReasonNotHeld)
		return nil, fmt.Errorf("redislock: resuming %s: %w", key, err)
	}
	if err != nil {
		l.observeFailure(ReasonRedisError)
		return nil, l.redisError(key, err)
	}
	if owner == "" {
		owner = l.owner // a hold of a version that kept no owner
	}
	k := &Lock{l: l, key: key, ks: ks, token: token, fence: fence, owner: owner, epoch: epoch}
	k.start(sent, left)
	return k, nil
}

// check returns a token's fence, time left and owner (the hold's, in
// whose name it was taken or handed over), or ErrNotHeld.
func check(ctx context.Context, rdb redis.UniversalClient, ks keyset, token string) (fence int64, left time.Duration, owner string, err error) {
	v, err := checkScript.Run(ctx, rdb, []string{ks.hold}, token).Slice()
	if errors.Is(err, redis.Nil) {
		return 0, 0, "", ErrNotHeld
	}
	if err != nil {
		return 0, 0, "", err
	}
	if len(v) < 3 {
		return 0, 0, "", fmt.Errorf("redislock: unexpected reply %v", v)
	}
	if fence, err = parseInt(v[0]); err != nil {
		return 0, 0, "", err
	}
	pttl, _ := v[1].(int64)
	owner, _ = v[2].(string)
	return fence, time.Duration(max(pttl, 0)) * time.Millisecond, owner, nil
}

// IsLocked reports whether any token holds key.
func (l *Locker) IsLocked(ctx context.Context, key string) (bool, error) {
	n, err := l.rdb.Exists(ctx, l.prefix+key).Result()
	if err != nil {
		return false, l.redisError(key, err)
	}
	return n > 0, nil
}

// HealthKey is the key (without prefix) Healthy takes, as seed 002's check
// takes "health_check_lock".
const HealthKey = "health_check_lock"

// Healthy is seed 002's health check: it takes and releases HealthKey
// within one second (waiting for other probes if need be). The probe is
// kept out of the metrics.
func (l *Locker) Healthy(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	k, err := l.acquire(ctx, HealthKey, false, false, lockcore.Wait(time.Second), lockcore.TTL(5*time.Second))
	if err != nil {
		return fmt.Errorf("redislock: health check: %w", err)
	}
	if err := k.Release(ctx); err != nil {
		return fmt.Errorf("redislock: health check: %w", err)
	}
	return nil
}

// Close stops the Locker's listener. Locks stay as they are in Redis; a
// Locker used after Close starts listening again when it needs to.
func (l *Locker) Close() error {
	l.mu.Lock()
	lis := l.lis
	l.lis, l.epoch = nil, 0
	if l.linger != nil {
		l.linger.Stop()
		l.linger = nil
	}
	l.mu.Unlock()
	if lis != nil {
		lis.stop()
	}
	return nil
}

func parseInt(v any) (int64, error) {
	switch x := v.(type) {
	case int64:
		return x, nil
	case string:
		return strconv.ParseInt(x, 10, 64)
	}
	return 0, fmt.Errorf("redislock: unexpected value %v (%T)", v, v)
}
