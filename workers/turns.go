package workers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/locktop/locktop/internal/source/redislocks"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/lockcore/redislock"
	"github.com/locktop/locktop/model"
)

// PointTurnRead is where a turn stops in tests: step 2 has read the
// conversation (turn number, scenario step, whether the message is
// answered), before the brain runs and the turn commits.
const PointTurnRead Point = "turn.read"

// errPodCrashed is the cause with which a turn's context ends when a pod
// running it crashes.
var errPodCrashed = errors.New("pod crashed")

// TurnOptions configure seed 002's conversation turns.
type TurnOptions struct {
	// Pods is how many simulated pods process messages, each with a
	// Locker and an owner of its own (default 4).
	Pods int
	// Prefix is the session locks' key prefix ("": redislock's
	// "sesslock:"). Simulations sharing a Redis but not a database need
	// prefixes of their own.
	Prefix string
	// TTL is a turn's hold: the seed's 300s workflow lease, scaled down so
	// that expiries show within seconds (default 2s).
	TTL time.Duration
	// Wait is how long step 1 waits for a held conversation (default 5s).
	Wait time.Duration
	// FailOpen processes a message without the lock when Redis is
	// unreachable: the seed's risky fallback.
	FailOpen bool
	// Logger gets the Lockers' warnings (nil: discarded).
	Logger *slog.Logger
}

// TurnTiming is how long a turn's steps take; durations are means of a
// uniform jitter of plus or minus half.
type TurnTiming struct {
	Step  time.Duration // accumulating, committing
	Brain time.Duration // a typical brain run
	// LongShare is the share of brain runs that outlast the TTL (1.2 to 2
	// TTLs) and so must extend the hold; ForgetShare the share of those
	// that forget to: their hold expires, another pod takes the
	// conversation, and the fence must refuse their stale commit.
	LongShare, ForgetShare float64
}

// TurnStats count what the turns did, beyond the counters per kind.
type TurnStats struct {
	Committed    int64 `json:"committed"`     // turns committed
	Duplicates   int64 `json:"duplicates"`    // messages found answered: handled by idempotency, not re-processed
	Extended     int64 `json:"extended"`      // extends of long brain runs
	Forgot       int64 `json:"forgot"`        // long runs that did not extend
	StaleRefused int64 `json:"stale_refused"` // commits the fence refused: the hold had expired and a newer turn entered
	Expired      int64 `json:"expired"`       // releases that found the hold gone: nothing deleted
	Crashed      int64 `json:"crashed"`       // turns cut off by a pod crash: the TTL frees their conversation
	Unavailable  int64 `json:"unavailable"`   // turns refused because Redis was unreachable (fail closed)
	FailOpen     int64 `json:"fail_open"`     // turns processed without the lock because Redis was unreachable
	PodCrashes   int64 `json:"pod_crashes"`
	Outages      int64 `json:"outages"`
}

type turnCounters struct {
	committed, duplicates, extended, forgot, staleRefused, expired, crashed, unavailable, failOpen, podCrashes, outages atomic.Int64
}

// pod is one incarnation of a simulated pod.
type pod struct {
	name   string
	locker *redislock.Locker
	ctx    context.Context // ends when the pod crashes
	crash  context.CancelFunc
}

// Turns runs seed 002's conversation turns: several pods, each with a
// redislock.Locker and an owner of its own, process messages for
// conversations keyed by redislock.SessionKey, with the seed's multi-step
// LogicalTurnWorkflow (see Deliver). The conversations and their turns are
// rows of the workloads' schema, so the checks run in the database as
// seed 001's do. Locking follows the Env's switch. Create it with
// NewTurns; close it with Close.
type Turns struct {
	env  *Env
	rdb  redis.UniversalClient
	opts TurnOptions

	timing  atomic.Pointer[TurnTiming]
	fencing atomic.Bool
	seq     atomic.Int64
	turnSeq atomic.Int64 // numbers each turn's owner
	stats   turnCounters

	mu        sync.Mutex
	pods      []*pod
	gens      []int
	old       []*redislock.Locker // lockers of crashed incarnations, closed by Close
	owners    map[string]bool     // every pod owner this process has had
	abandoned map[string]bool     // token prefixes of holds left to expire (crashes, failed releases)
	reported  keySet
}

// NewTurns returns the conversation turns of env on rdb (create it with
// ContextTimeoutEnabled, as redislock asks).
func NewTurns(env *Env, rdb redis.UniversalClient, opts TurnOptions) *Turns {
	opts.Pods = cmp.Or(opts.Pods, 4)
	opts.Prefix = cmp.Or(opts.Prefix, redislock.DefaultPrefix)
	opts.TTL = cmp.Or(opts.TTL, 2*time.Second)
	opts.Wait = cmp.Or(opts.Wait, 5*time.Second)
	t := &Turns{env: env, rdb: rdb, opts: opts, owners: map[string]bool{}, abandoned: map[string]bool{}}
	t.timing.Store(&TurnTiming{})
	t.fencing.Store(true)
	t.gens = make([]int, opts.Pods)
	for i := range opts.Pods {
		t.pods = append(t.pods, t.newPod(i))
	}
	return t
}

// newPod starts incarnation t.gens[i] of pod i. t.mu must be held (or t
// not shared yet).
func (t *Turns) newPod(i int) *pod {
	t.gens[i]++
	name := fmt.Sprintf("pod-%d.%d", i+1, t.gens[i])
	owner := t.env.Proc + "/" + name
	t.owners[owner] = true
	ctx, cancel := context.WithCancel(context.Background())
	l := redislock.New(t.rdb, redislock.Options{
		Prefix: t.opts.Prefix, TTL: t.opts.TTL, Wait: t.opts.Wait, Owner: owner, FailOpen: t.opts.FailOpen, Logger: t.opts.Logger,
	})
	return &pod{name: name, locker: l, ctx: ctx, crash: cancel}
}

// Options returns the options, defaults filled in.
func (t *Turns) Options() TurnOptions { return t.opts }

// SetTiming replaces the timing.
func (t *Turns) SetTiming(tm TurnTiming) { t.timing.Store(&tm) }

// SetFencing turns the storage side of fencing on or off: off, a commit
// whose fence a newer grant has superseded is accepted (and the checks
// must catch it). On by default; for tests of the checks.
func (t *Turns) SetFencing(on bool) { t.fencing.Store(on) }

// Stats returns what the turns did so far.
func (t *Turns) Stats() TurnStats {
	c := &t.stats
	return TurnStats{
		Committed: c.committed.Load(), Duplicates: c.duplicates.Load(), Extended: c.extended.Load(), Forgot: c.forgot.Load(),
		StaleRefused: c.staleRefused.Load(), Expired: c.expired.Load(), Crashed: c.crashed.Load(),
		Unavailable: c.unavailable.Load(), FailOpen: c.failOpen.Load(), PodCrashes: c.podCrashes.Load(), Outages: c.outages.Load(),
	}
}

// ResetStats zeroes the stats, for a new run.
func (t *Turns) ResetStats() {
	c := &t.stats
	for _, n := range []*atomic.Int64{&c.committed, &c.duplicates, &c.extended, &c.forgot, &c.staleRefused, &c.expired,
		&c.crashed, &c.unavailable, &c.failOpen, &c.podCrashes, &c.outages} {
		n.Store(0)
	}
}

// ConversationKey is conversation conv's session key (without the prefix):
// redislock.SessionKey of its tenant, agent, customer and channel.
func ConversationKey(conv int32) string {
	channel := "web"
	if conv%2 == 0 {
		channel = "sms"
	}
	return redislock.SessionKey("t"+strconv.Itoa(int(conv%3)+1), "agent"+strconv.Itoa(int(conv%2)+1),
		"cust"+strconv.Itoa(int(conv)), channel)
}

// NewMessage returns a message id unique across processes.
func (t *Turns) NewMessage() string {
	return t.env.Proc + "-m" + strconv.FormatInt(t.seq.Add(1), 10)
}

// pick returns a live pod at random.
func (t *Turns) pick() *pod {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.pods[rand.IntN(len(t.pods))]
}

// CrashPod crashes a pod at random: the turns it runs stop where they are,
// holding what they hold (the TTL frees their conversations), and the pod
// restarts at once as a new incarnation with a new Locker and owner. It
// returns the crashed incarnation's name.
func (t *Turns) CrashPod() string {
	t.mu.Lock()
	i := rand.IntN(len(t.pods))
	p := t.pods[i]
	t.pods[i] = t.newPod(i)
	t.old = append(t.old, p.locker)
	t.mu.Unlock()
	p.crash()
	t.stats.podCrashes.Add(1)
	t.env.Rec.Note(KindTurn, lockcore.Key{}, p.name+" crashed: its turns stop mid-way; their holds expire with the TTL")
	return p.name
}

// Outage makes Redis stop answering every client for d (CLIENT PAUSE ...
// ALL, on every primary of a Cluster): turns fail closed, or run
// unprotected with FailOpen; holders cannot extend.
func (t *Turns) Outage(ctx context.Context, d time.Duration) error {
	pause := func(ctx context.Context, c redis.UniversalClient) error {
		return c.Do(ctx, "CLIENT", "PAUSE", d.Milliseconds(), "ALL").Err()
	}
	var err error
	if cc, ok := t.rdb.(*redis.ClusterClient); ok {
		// A Cluster's outage is every primary's: CLIENT PAUSE is one node's.
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return pause(ctx, c) })
	} else {
		err = pause(ctx, t.rdb)
	}
	if err != nil {
		return fmt.Errorf("redis outage: %w", err)
	}
	t.stats.outages.Add(1)
	t.env.Rec.Note(KindTurn, lockcore.Key{}, fmt.Sprintf("Redis outage: no client gets an answer for %s", d.Round(time.Millisecond)))
	return nil
}

// Inspect lists the session locks held under the turns' prefix (by any
// process), with their waiters.
func (t *Turns) Inspect(ctx context.Context) ([]redislocks.Info, error) {
	tb, err := redislocks.Read(ctx, t.rdb, t.opts.Prefix, 100000)
	return tb.Locks, err
}

// Close closes every pod's Locker (holds stay in Redis as they are).
func (t *Turns) Close() {
	t.mu.Lock()
	ls := append([]*redislock.Locker(nil), t.old...)
	for _, p := range t.pods {
		ls = append(ls, p.locker)
	}
	t.mu.Unlock()
	for _, l := range ls {
		_ = l.Close()
	}
}

// crashable returns ctx, ended also (cause errPodCrashed) when one of pods
// crashes.
func crashable(ctx context.Context, pods ...*pod) (context.Context, func()) {
	c, cancel := context.WithCancelCause(ctx)
	stops := make([]func() bool, 0, len(pods))
	for _, p := range pods {
		stops = append(stops, context.AfterFunc(p.ctx, func() { cancel(errPodCrashed) }))
	}
	return c, func() {
		for _, s := range stops {
			s()
		}
		cancel(nil)
	}
}

// turn is one message's LogicalTurnWorkflow as it runs.
type turn struct {
	t      *Turns
	conv   int32
	msg    string
	key    string
	label  string
	start  time.Time
	token  string // the hold's token: the workflow state steps 2-4 resume it by
	sec    section
	lk     *redislock.Lock
	relPod *pod
}

// Deliver handles message msg for conversation conv as the seed's
// LogicalTurnWorkflow does, with locking on:
//
//  1. acquire the conversation's session lock on one pod, without a scope
//     (Acquire with the turn TTL), keep its token in the workflow state, and
//     raise the conversation's fence to the grant's;
//  2. accumulate, on any pod: resume the hold by its token, read the
//     conversation (turn number, scenario step) and whether the message was
//     answered already (a redelivery: handled by idempotency, released);
//  3. run the brain, a random duration; a run longer than the TTL extends
//     the hold every third of the TTL, unless it is one that forgets;
//  4. commit the turn (number + 1, the step advanced) in one transaction
//     that refuses a fence older than the conversation's, then release by
//     token. A failure at any step releases too; a pod crash does not.
//
// With locking off, the same steps run with no lock and no fence. Redis
// unreachable in step 1: the turn fails (ErrUnavailable), unless FailOpen,
// which runs it unprotected.
func (t *Turns) Deliver(ctx context.Context, conv int32, msg string) error {
	a, b := t.pick(), t.pick() // step 1's pod, and the pod that runs steps 2-4
	ctx, stop := crashable(ctx, a, b)
	defer stop()
	key := ConversationKey(conv)
	tu := &turn{t: t, conv: conv, msg: msg, key: key, label: t.opts.Prefix + key, start: time.Now(), relPod: b}
	if err := tu.acquire(ctx, a); err != nil {
		return err
	}
	if err := tu.run(ctx, b); err != nil {
		return tu.fail(ctx, err)
	}
	tu.release(ctx)
	return nil
}

func (tu *turn) attempt(out model.Outcome, err error, body bool) {
	a := Attempt{Kind: KindTurn, Label: tu.label, Outcome: out, Wait: time.Since(tu.start), Err: err, Body: body}
	if out == model.OutcomeLost {
		a.Loss = tu.sec.loss()
	}
	tu.t.env.Rec.Attempt(a)
}

// acquire is step 1.
func (tu *turn) acquire(ctx context.Context, p *pod) error {
	t := tu.t
	if !t.env.Locking() {
		tu.attempt(model.OutcomeAcquired, nil, false)
		return nil
	}
	// A turn is a task of its own (lockcore.WithOwner): under the pod's
	// owner alone, two of a pod's turns, one holding and one waiting,
	// looked like one party holding and waiting, and the deadlock watch
	// reported a cycle no turn made.
	octx := lockcore.WithOwner(ctx, t.env.Proc+"/"+p.name+"/turn-"+strconv.FormatInt(t.turnSeq.Add(1), 10))
	lk, err := p.locker.Acquire(octx, tu.key, lockcore.Wait(t.opts.Wait), lockcore.TTL(t.opts.TTL))
	switch {
	case err == nil:
		tu.token, tu.sec.fence = lk.Token(), lk.Fence()
		tu.attempt(model.OutcomeAcquired, nil, false)
	case errors.Is(err, redislock.ErrUnavailable) && t.opts.FailOpen && ctx.Err() == nil:
		t.stats.failOpen.Add(1)
		t.env.Rec.Note(KindTurn, lockcore.Key{}, tu.label+": Redis unavailable, processing without the lock (FailOpen, the ACF session mutex's risky fallback)")
		tu.attempt("", nil, false) // ran without a lock
		return nil
	default:
		if errors.Is(context.Cause(ctx), errPodCrashed) {
			t.stats.crashed.Add(1)
			return err
		}
		if errors.Is(err, redislock.ErrUnavailable) {
			t.stats.unavailable.Add(1)
		}
		tu.attempt(classify(ctx, err), err, false)
		return err
	}
	// Entering: a newer fence already in means the hold was lost already.
	var cur int64
	if err := t.env.DB.Get(ctx, "UPDATE conversations SET fence = greatest(fence, $2) WHERE id = $1 RETURNING fence",
		[]any{tu.conv, tu.sec.fence}, &cur); err != nil {
		return tu.fail(ctx, fmt.Errorf("turn on %s: entering: %w", tu.label, err))
	}
	if cur > tu.sec.fence {
		tu.sec.refused.Add(1)
		return tu.fail(ctx, fmt.Errorf("%w: turn on %s entered with fence %d after fence %d", ErrFenced, tu.label, tu.sec.fence, cur))
	}
	return nil
}

// run is steps 2 to 4 on pod p, up to the commit.
func (tu *turn) run(ctx context.Context, p *pod) error {
	t := tu.t
	tm := *t.timing.Load()
	// Step 2: accumulate, on whichever pod the workflow engine picked.
	if tu.token != "" {
		lk, err := p.locker.Resume(ctx, tu.key, tu.token)
		if err != nil {
			tu.sec.stopped.Store(errors.Is(err, redislock.ErrNotHeld))
			return fmt.Errorf("turn on %s: resuming the hold: %w", tu.label, err)
		}
		tu.lk = lk
	}
	var turnNo, step int32
	var answered bool
	if err := t.env.DB.Get(ctx, `SELECT c.turn_no, c.step, EXISTS (SELECT 1 FROM conv_turns m WHERE m.message_id = $2)
		FROM conversations c WHERE c.id = $1`, []any{tu.conv, tu.msg}, &turnNo, &step, &answered); err != nil {
		return fmt.Errorf("turn on %s: reading the conversation: %w", tu.label, err)
	}
	if answered {
		t.stats.duplicates.Add(1)
		t.env.Rec.Note(KindTurn, lockcore.Key{}, fmt.Sprintf("%s: message %s already answered: handled by idempotency, not re-processed", tu.label, tu.msg))
		return nil
	}
	t.env.at(ctx, PointTurnRead, tu.conv)
	if err := sleep(ctx, tm.Step); err != nil {
		return err
	}
	// Step 3: the brain.
	if err := tu.brain(ctx, tm); err != nil {
		return err
	}
	// Step 4: commit.
	if err := tu.commit(ctx, turnNo+1, step, p.name); err != nil {
		return err
	}
	t.stats.committed.Add(1)
	t.env.Rec.Section(KindTurn)
	return nil
}

// brain runs the brain for a random time; a run longer than the TTL
// extends the hold every third of the TTL, unless it forgets.
func (tu *turn) brain(ctx context.Context, tm TurnTiming) error {
	t := tu.t
	d := tm.Brain/2 + rand.N(tm.Brain+1)
	long := tm.LongShare > 0 && rand.Float64() < tm.LongShare
	if !long {
		return Pause(ctx, d)
	}
	d = t.opts.TTL*6/5 + rand.N(t.opts.TTL*4/5+1)
	if tu.lk == nil || rand.Float64() < tm.ForgetShare {
		if tu.lk != nil {
			t.stats.forgot.Add(1)
		}
		return Pause(ctx, d) // the seed's code neither extends nor watches its hold
	}
	// A careful run: extend every third of the TTL, and stop if the hold
	// is lost all the same (Redis away for longer than the TTL).
	lctx := tu.lk.Context()
	end := time.Now().Add(d)
	for left := time.Until(end); left > 0; left = time.Until(end) {
		err := Pause(lctx, min(left, t.opts.TTL/3))
		if errors.Is(context.Cause(lctx), redislock.ErrLost) {
			tu.sec.stopped.Store(true)
			return fmt.Errorf("turn on %s: brain: %w", tu.label, context.Cause(lctx))
		}
		if err != nil {
			return context.Cause(ctx)
		}
		if err := tu.lk.Extend(ctx, t.opts.TTL); err != nil {
			if errors.Is(err, redislock.ErrNotHeld) {
				tu.sec.stopped.Store(true)
				return fmt.Errorf("turn on %s: extending: %w", tu.label, err)
			}
			continue // Redis away: the next try may reach it before the hold runs out
		}
		t.stats.extended.Add(1)
	}
	return nil
}

// turnCommitSQL writes a turn and moves the conversation on, and counts
// what the run committed before it that the turn repeats: its number, its
// message, its starting step ($8: the run's start).
const turnCommitSQL = `
	WITH prior AS (
		SELECT count(*) FILTER (WHERE turn_no = $2) AS same_no,
		       count(*) FILTER (WHERE message_id = $3) AS same_msg,
		       count(*) FILTER (WHERE step_from = $4) AS same_step
		FROM conv_turns WHERE conv_id = $1 AND at >= $8),
	ins AS (INSERT INTO conv_turns (conv_id, turn_no, message_id, step_from, fence, pod, proc)
		VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id),
	upd AS (UPDATE conversations SET turn_no = $2, step = $4 + 1, fence = greatest(fence, $5) WHERE id = $1)
	SELECT (SELECT id FROM ins), same_no, same_msg, same_step FROM prior`

// commit is step 4's write: one transaction that holds the conversation's
// row, refuses a stale fence (when fencing is on) and writes the turn.
func (tu *turn) commit(ctx context.Context, turnNo, step int32, podName string) error {
	t := tu.t
	var id, sameNo, sameMsg, sameStep, cur int64
	err := t.env.DB.Tx(ctx, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, "SELECT fence FROM conversations WHERE id = $1 FOR UPDATE", tu.conv).Scan(&cur); err != nil {
			return err
		}
		if tu.sec.fence > 0 && cur > tu.sec.fence && t.fencing.Load() {
			return fmt.Errorf("%w: turn on %s, fence %d, conversation at fence %d", ErrFenced, tu.label, tu.sec.fence, cur)
		}
		return tx.QueryRow(ctx, turnCommitSQL, tu.conv, turnNo, tu.msg, step, tu.sec.fence, podName, t.env.Proc, t.env.Since()).
			Scan(&id, &sameNo, &sameMsg, &sameStep)
	})
	if errors.Is(err, ErrFenced) {
		tu.sec.refused.Add(1)
		t.stats.staleRefused.Add(1)
		return err
	}
	if err != nil {
		return fmt.Errorf("turn on %s: committing: %w", tu.label, err)
	}
	tu.sec.writes.Add(1)
	conv := strconv.Itoa(int(tu.conv))
	if sameNo > 0 {
		t.report(InvTurnSequence, "turn:"+conv+"/"+strconv.Itoa(int(turnNo)),
			fmt.Sprintf("%s: turn number %d committed twice (collision)", tu.label, turnNo))
	}
	if sameMsg > 0 {
		t.report(InvAnsweredOnce, "message:"+tu.msg, fmt.Sprintf("%s: message %s answered twice", tu.label, tu.msg))
	}
	if sameStep > 0 {
		t.report(InvStaleStep, "step:"+conv+"/"+strconv.Itoa(int(step)),
			fmt.Sprintf("%s: scenario step %d advanced twice: a turn applied it from stale state", tu.label, step))
	}
	if tu.sec.fence > 0 && cur > tu.sec.fence {
		t.report(InvStaleFence, "commit:"+strconv.FormatInt(id, 10),
			fmt.Sprintf("%s: a commit with fence %d accepted after fence %d had entered", tu.label, tu.sec.fence, cur))
	}
	return nil
}

// report reports a subject once (the audit skips what the live checks
// reported).
func (t *Turns) report(inv Invariant, subject, detail string) {
	if t.reported.add(string(inv) + "\x00" + subject) {
		t.env.Rec.Violation(inv, subject, detail)
	}
}

// fail ends a turn that failed after step 1: it releases the hold by its
// token (the seed's on_failure), unless a pod crash cut the turn off.
func (tu *turn) fail(ctx context.Context, err error) error {
	t := tu.t
	if errors.Is(context.Cause(ctx), errPodCrashed) {
		t.stats.crashed.Add(1)
		t.abandon(tu.token)
		return err
	}
	tu.release(ctx)
	tu.attempt(classify(ctx, err), err, true)
	return err
}

// release releases the hold by its token on a fresh bounded context, as
// commit_and_respond and on_failure do. A hold that expired meanwhile is
// not deleted (the seed's bare DELETE would have removed the next
// holder's); one that cannot be released now is left to expire.
func (tu *turn) release(ctx context.Context) {
	t := tu.t
	if tu.token == "" {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	lk := tu.lk
	var err error
	if lk == nil {
		lk, err = tu.relPod.locker.Resume(rctx, tu.key, tu.token)
	}
	if err == nil {
		err = lk.Release(rctx)
	}
	switch {
	case err == nil:
	case errors.Is(err, redislock.ErrNotHeld):
		t.stats.expired.Add(1)
		t.env.Rec.Note(KindTurn, lockcore.Key{}, fmt.Sprintf("%s: the hold (fence %d) had expired: release deleted nothing", tu.label, tu.sec.fence))
	default:
		t.abandon(tu.token)
		t.env.Rec.Note(KindTurn, lockcore.Key{}, fmt.Sprintf("%s: release failed (%v): the hold expires with its TTL", tu.label, err))
	}
}

// abandon notes a hold left to expire.
func (t *Turns) abandon(token string) {
	if token == "" {
		return
	}
	t.mu.Lock()
	t.abandoned[token[:min(6, len(token))]] = true
	t.mu.Unlock()
}
