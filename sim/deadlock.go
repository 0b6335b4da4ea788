// Deadlocks across lock kinds, made on purpose (scenario "deadlock"), and
// the watch that must report each of them within two polls, and nothing
// else (any scenario, Options.WatchDeadlocks).

package sim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/internal/connect"
	"github.com/locktop/locktop/internal/source"
	"github.com/locktop/locktop/internal/source/leasesource"
	"github.com/locktop/locktop/internal/source/pgsource"
	"github.com/locktop/locktop/internal/source/redissource"
	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/lockcore/lease"
	"github.com/locktop/locktop/lockcore/redislock"
	"github.com/locktop/locktop/lockcore/registry"
	"github.com/locktop/locktop/model"
	"github.com/locktop/locktop/model/waitfor"
	"github.com/locktop/locktop/workers"
)

// InvDeadlocks is the deadlock watch's invariant: every cycle the scenario
// made is reported within two polls of forming, and nothing else is.
const InvDeadlocks workers.Invariant = "deadlocks reported within two polls, no other"

// DeadlockPoll is how often the watch polls every source: the dashboard's
// interval while anyone waits (--wait-interval).
const DeadlockPoll = 200 * time.Millisecond

// The waits of a made cycle: the party that times out first waits
// deadlockFirst, the other deadlockSecond, so the cycle lasts
// deadlockFirst (many polls), and is broken by that timeout alone.
const (
	deadlockFirst  = 2 * time.Second
	deadlockSecond = 3 * time.Second
)

// DeadlockStats are what the watch saw.
type DeadlockStats struct {
	// Parties are the simulated processes that make the cycles, two per
	// pair of kinds (0 when the watch only watches another scenario).
	Parties int `json:"parties,omitempty"`
	// Made counts the cycles the scenario made, by the kinds of their
	// waits ("advisory+redis").
	Made map[string]int `json:"made"`
	// Reported counts the deadlocks the watch reported; Checked the made
	// cycles it was asked about (those formed well before the run ended).
	Reported int `json:"reported"`
	Checked  int `json:"checked"`
	// Missed are made cycles never reported; Late those reported after
	// more than two polls; Unexpected reports of no cycle made here.
	// Short are made cycles not reported that did not last the polls it
	// takes to see one (on a loaded machine a poll can take a second of
	// the cycle's two): not asked about, like those made as the run ended.
	Missed     int `json:"missed"`
	Short      int `json:"short,omitempty"`
	Late       int `json:"late"`
	Unexpected int `json:"unexpected"`
	// MaxPolls is the most polls any made cycle took to be reported,
	// counted from the first poll taken after it formed.
	MaxPolls int `json:"max_polls"`
	Polls    int `json:"polls"`
}

// party is one simulated process: an owner id stamped on every lock it
// takes, of every kind (the advisory lock connections carry it in their
// application_name).
type party struct {
	owner string
	pool  *pgxpool.Pool
	locks *lockcore.Service
	redis *redislock.Locker
	lease *lease.Manager
}

// pairKinds are the pairs of kinds a cycle is made of.
var pairKinds = [][2]model.Kind{
	{model.KindAdvisory, model.KindRedis},
	{model.KindAdvisory, model.KindLease},
	{model.KindRedis, model.KindLease},
}

// made is one cycle the scenario made.
type made struct {
	x, y  string // its parties' owners
	kinds string
	at    time.Time // both parties waiting (by this process's clock)
	// broken is when the first party's wait ended, and with it the cycle;
	// zero while it lasts.
	broken time.Time
}

// deadlocks is the deadlock system: the parties of each pair of kinds and
// what was made; and the watch.
type deadlocks struct {
	parties [][2]*party
	seq     atomic.Int64

	mu   sync.Mutex
	made []made
	// The watch's findings.
	polls   []time.Time // when each poll began (this process's clock)
	ends    []time.Time // when each poll's sources had all answered
	found   []found
	watched bool
}

// found is a deadlock the watch reported.
type found struct {
	c    waitfor.Cycle
	poll int // the poll that confirmed it
}

// openDeadlocks makes the parties: two per pair of kinds, each with its own
// connections, Redis Locker and lease Manager.
func (s *Sim) openDeadlocks(ctx context.Context) (*deadlocks, error) {
	open, err := s.leaseOpener(ctx)
	if err != nil {
		return nil, err
	}
	d := &deadlocks{}
	newParty := func(owner string, wait time.Duration) (*party, error) {
		cfg, err := connect.PoolConfig(s.opts.DSN)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrUnusable, err)
		}
		cfg.MinConns, cfg.MaxConns = 0, 4
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrUnusable, err)
		}
		p := &party{owner: owner, pool: pool,
			locks: lockcore.New(pool, lockcore.ApplicationName("sim deadlock"), lockcore.OwnerID(owner), lockcore.NoFencing()),
			redis: redislock.New(s.rdb, redislock.Options{Prefix: s.opts.RedisPrefix, Owner: owner, TTL: 30 * time.Second})}
		p.lease, err = open(ctx, lease.Options{Owner: owner, Wait: wait})
		if err != nil {
			pool.Close()
			p.redis.Close()
			return nil, fmt.Errorf("%w: %w", ErrUnusable, err)
		}
		return p, nil
	}
	for i := range pairKinds {
		var pair [2]*party
		for j, wait := range []time.Duration{deadlockFirst, deadlockSecond} {
			owner := s.proc + "-dl" + strconv.Itoa(i) + "xy"[j:j+1]
			p, err := newParty(owner, wait)
			if err != nil {
				d.close()
				return nil, err
			}
			pair[j] = p
		}
		d.parties = append(d.parties, pair)
	}
	return d, nil
}

func (d *deadlocks) close() {
	if d == nil {
		return
	}
	for _, pair := range d.parties {
		for _, p := range pair {
			if p == nil {
				continue
			}
			p.redis.Close()
			_ = p.lease.Close()
			p.pool.Close()
		}
	}
}

// take takes a lock of kind k named by n for p, waiting at most wait, and
// returns its release.
func (p *party) take(ctx context.Context, k model.Kind, n int64, wait time.Duration) (func(), error) {
	bg := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), 5*time.Second)
	}
	switch k {
	case model.KindAdvisory:
		l, err := p.locks.Acquire(ctx, lockcore.Pair(registry.SpaceAgent, int32(1_000_000+n)), lockcore.Wait(wait))
		if err != nil {
			return nil, err
		}
		return func() { c, cancel := bg(); defer cancel(); _ = l.Release(c) }, nil
	case model.KindRedis:
		l, err := p.redis.Acquire(ctx, "deadlock:"+strconv.FormatInt(n, 10), lockcore.Wait(wait))
		if err != nil {
			return nil, err
		}
		return func() { c, cancel := bg(); defer cancel(); _ = l.Release(c) }, nil
	default:
		l, err := p.lease.Acquire(ctx, lease.Map("deadlock-"+strconv.FormatInt(n, 10)), lease.Write)
		if err != nil {
			return nil, err
		}
		return func() { c, cancel := bg(); defer cancel(); _ = l.Release(c) }, nil
	}
}

// unitDeadlock makes one cycle of the i-th pair of kinds: x takes a lock of
// the first kind, y one of the second; then each waits for the other's.
// Nothing breaks it but x's timeout; then y gets x's lock and both let go.
func unitDeadlock(i int) func(s *Sim, ctx context.Context) error {
	return func(s *Sim, ctx context.Context) error {
		d := s.dead
		if d == nil {
			return errors.New("sim: the deadlock system is not set up")
		}
		pk, pair := pairKinds[i], d.parties[i]
		n := d.seq.Add(1)
		x, y := pair[0], pair[1]
		var relX, relY func()
		var errX, errY error
		var wg sync.WaitGroup
		wg.Go(func() { relX, errX = x.take(ctx, pk[0], n, deadlockFirst) })
		wg.Go(func() { relY, errY = y.take(ctx, pk[1], n, deadlockFirst) })
		wg.Wait()
		if errX != nil || errY != nil {
			for _, rel := range []func(){relX, relY} {
				if rel != nil {
					rel()
				}
			}
			return errors.Join(errX, errY)
		}
		// Both hold their first: each now waits for the other's.
		var secX, secY func()
		d.mu.Lock()
		d.made = append(d.made, made{x: x.owner, y: y.owner, kinds: kindsLabel(pk)})
		m := len(d.made) - 1
		d.mu.Unlock()
		wg.Go(func() {
			secX, errX = x.take(ctx, pk[1], n, deadlockFirst)
			d.mu.Lock()
			d.made[m].broken = time.Now()
			d.mu.Unlock()
			relX() // x gives up (its timeout): y gets it
		})
		wg.Go(func() {
			secY, errY = y.take(ctx, pk[0], n, deadlockSecond)
			relY()
		})
		d.mu.Lock()
		d.made[m].at = time.Now()
		d.mu.Unlock()
		wg.Wait()
		for _, rel := range []func(){secX, secY} {
			if rel != nil {
				rel()
			}
		}
		if errX == nil {
			return errors.New("sim: a deadlock's first party got the lock it should have waited out")
		}
		return nil
	}
}

// kindsLabel is waitfor.Cycle.KindsLabel of a pair of kinds.
func kindsLabel(pk [2]model.Kind) string {
	ks := slices.Clone(pk[:])
	slices.SortFunc(ks, func(a, b model.Kind) int { return slices.Index(model.Kinds, a) - slices.Index(model.Kinds, b) })
	return string(ks[0]) + "+" + string(ks[1])
}

// watchDeadlocks polls every source of this simulator's locks every
// DeadlockPoll until ctx ends, merged as the dashboard merges them, and
// keeps the deadlocks the detector reports.
func (s *Sim) watchDeadlocks(ctx context.Context, d *deadlocks) {
	mon, err := pgsource.Connect(ctx, s.opts.DSN, pgsource.Options{})
	if err != nil {
		s.log.Warn("deadlock watch", "err", err)
		return
	}
	defer mon.Close()
	srcs := []source.Source{source.Named("postgres", mon.Poll)}
	if s.rdb != nil {
		srcs = append(srcs, redissource.New(s.rdb, redissource.Options{Prefix: s.opts.RedisPrefix}))
	}
	switch {
	case s.opts.LeaseStore == LeaseSQLite && s.leasePath() != "":
		srcs = append(srcs, leasesource.SQLite("lease", s.leasePath()))
	case s.leasePool != nil:
		srcs = append(srcs, leasesource.Postgres("lease", s.leasePool, s.opts.LeaseSchema, false))
	}
	var det waitfor.Detector
	d.mu.Lock()
	d.watched = true
	d.mu.Unlock()
	for workers.Pause(ctx, DeadlockPoll) == nil {
		begun := time.Now()
		parts := source.PollAll(ctx, srcs)
		if ctx.Err() != nil {
			return
		}
		ended := time.Now()
		snap := model.Merge(parts)
		_, fresh := det.Observe(waitfor.Build(&snap))
		d.mu.Lock()
		d.polls, d.ends = append(d.polls, begun), append(d.ends, ended)
		for _, c := range fresh {
			d.found = append(d.found, found{c: c, poll: len(d.polls) - 1})
			s.rec.emit(model.Event{Worker: "locktop", Outcome: model.OutcomeDeadlock, Key: c.KindsLabel(), Detail: "deadlock " + c.Summary()})
		}
		d.mu.Unlock()
	}
}

// check matches what was made with what was reported, once the run is
// over: each made cycle formed at least three polls before the watch ended
// must be reported within two polls of the first poll after it formed;
// every report must be of a made cycle.
func (d *deadlocks) check(rec *recorder) DeadlockStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := DeadlockStats{Parties: 2 * len(d.parties), Made: map[string]int{}, Reported: len(d.found), Polls: len(d.polls)}
	used := make([]bool, len(d.found))
	var end time.Time
	if n := len(d.polls); n > 0 {
		end = d.polls[n-1]
	}
	for _, m := range d.made {
		st.Made[m.kinds]++
		if !d.watched {
			continue
		}
		j := -1
		for k := range d.found {
			f := &d.found[k]
			if used[k] || f.c.KindsLabel() != m.kinds || !slices.Equal(f.c.Sessions, []waitfor.Session{{Owner: m.x}, {Owner: m.y}}) {
				continue
			}
			if d.polls[f.poll].Before(m.at.Add(-time.Second)) {
				continue // an earlier cycle of the same parties
			}
			j = k
			break
		}
		if j < 0 && m.at.After(end.Add(-3*DeadlockPoll)) {
			continue // formed as the watch ended, not reported: not asked about
		}
		if j < 0 && d.whole(m) < 3 {
			st.Short++ // see DeadlockStats.Short
			continue
		}
		st.Checked++
		if j < 0 {
			st.Missed++
			rec.Violation(InvDeadlocks, m.kinds, fmt.Sprintf("a %s cycle made at %s between %s and %s was never reported", m.kinds, m.at.Format("15:04:05.000"), m.x, m.y))
			continue
		}
		used[j] = true
		// Polls begun after it formed, up to the one that confirmed it. It
		// formed when both waits were in: after this process started them,
		// and at the latest wait start the sources show (their clocks).
		formed := m.at
		if f := d.found[j].c.Formed(); f.After(formed) {
			formed = f
		}
		first, _ := slices.BinarySearchFunc(d.polls, formed, func(p, t time.Time) int { return p.Compare(t) })
		polls := d.found[j].poll - first + 1
		st.MaxPolls = max(st.MaxPolls, polls)
		if polls > 2 {
			st.Late++
			rec.Violation(InvDeadlocks, m.kinds, fmt.Sprintf("a %s cycle between %s and %s was reported after %d polls", m.kinds, m.x, m.y, polls))
		}
	}
	for k, f := range d.found {
		if used[k] || d.madeBy(f.c) {
			continue
		}
		st.Unexpected++
		rec.Violation(InvDeadlocks, f.c.KindsLabel(), "a deadlock no scenario made: "+f.c.Summary())
	}
	return st
}

// whole counts the polls that began after m formed and had every source's
// answer before it broke: two in a row must see a cycle to report it, and
// one more allows for its waits reaching the servers after m.at.
func (d *deadlocks) whole(m made) int {
	n := 0
	for k, begun := range d.polls {
		if !begun.Before(m.at) && (m.broken.IsZero() || !d.ends[k].After(m.broken)) {
			n++
		}
	}
	return n
}

// madeBy reports whether c is between the parties of a pair (a cycle made
// as the watch ended, not asked about).
func (d *deadlocks) madeBy(c waitfor.Cycle) bool {
	for _, m := range d.made {
		if slices.Equal(c.Sessions, []waitfor.Session{{Owner: m.x}, {Owner: m.y}}) {
			return true
		}
	}
	return false
}
