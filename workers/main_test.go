package workers_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/model"
	"github.com/locktop/locktop/workers"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var schemaSeq atomic.Int32

// world is one test's schema, pools, env and recorder.
type world struct {
	env    *workers.Env
	rec    *rec
	hooks  *hooks
	locks  *lockcore.Service
	work   *pgxpool.Pool
	lock   *pgxpool.Pool
	schema string
}

// newWorld sets up a schema of the test's own with n agents, locking on, no
// think time.
func newWorld(t *testing.T, agents int) *world {
	t.Helper()
	return newWorldWith(t, agents, func(t *testing.T, configure func(*pgxpool.Config)) *pgxpool.Pool {
		return pgtest.Pool(t, configure)
	})
}

// newWorldWith is newWorld with pools from pool (given the configuration
// the world needs); the work pool is the first one asked for.
func newWorldWith(t *testing.T, agents int, pool func(*testing.T, func(*pgxpool.Config)) *pgxpool.Pool) *world {
	t.Helper()
	schema := fmt.Sprintf("wt_%d", schemaSeq.Add(1))
	cfg := func(c *pgxpool.Config) {
		c.MaxConns = 8
		c.ConnConfig.RuntimeParams["search_path"] = schema
	}
	w := &world{schema: schema, rec: &rec{}, hooks: &hooks{}}
	w.work = pool(t, cfg)
	w.lock = pool(t, cfg)
	ctx := context.Background()
	if err := workers.Setup(ctx, w.work, schema); err != nil {
		t.Fatal(err)
	}
	db := workers.NewDB(w.work)
	if err := workers.EnsureAgents(ctx, db, agents); err != nil {
		t.Fatal(err)
	}
	w.locks = lockcore.New(w.lock, lockcore.Logger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	w.env = workers.NewEnv(db, w.locks, w.rec, "test-"+schema)
	w.env.Hooks = &workers.Hooks{At: w.hooks.at}
	w.env.ConfigPath = filepath.Join(t.TempDir(), "config.json")
	var wg sync.WaitGroup
	w.env.Spawn = func(_ workers.Kind, fn func(context.Context)) {
		wg.Go(func() { fn(context.Background()) })
	}
	t.Cleanup(wg.Wait)
	return w
}

// waitQueued polls pg_locks until n sessions wait for agent's key.
func (w *world) waitQueued(t *testing.T, agent int32, n int) {
	t.Helper()
	pgtest.Eventually(t, fmt.Sprintf("%d waiter(s) queue on AGENT %d", n, agent), func() bool {
		var waiting int
		err := w.work.QueryRow(context.Background(), `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'
			AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
			AND classid = 1 AND objid = $1::int8::oid AND objsubid = 2 AND NOT granted`, int64(agent)).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		return waiting >= n
	})
}

// rec is a workers.Recorder that keeps everything.
type rec struct {
	mu         sync.Mutex
	attempts   []workers.Attempt
	violations map[workers.Invariant][]string // one per subject
	calls      map[workers.Invariant]int      // every report
	seen       map[string]bool
	notes      []string
	sections   int
}

func (r *rec) Attempt(a workers.Attempt) {
	r.mu.Lock()
	r.attempts = append(r.attempts, a)
	r.mu.Unlock()
}

func (r *rec) Section(workers.Kind) { r.mu.Lock(); r.sections++; r.mu.Unlock() }

func (r *rec) Violation(inv workers.Invariant, subject, detail string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen, r.violations, r.calls = map[string]bool{}, map[workers.Invariant][]string{}, map[workers.Invariant]int{}
	}
	r.calls[inv]++
	if r.seen[string(inv)+subject] {
		return
	}
	r.seen[string(inv)+subject] = true
	r.violations[inv] = append(r.violations[inv], detail)
}

func (r *rec) Note(_ workers.Kind, _ lockcore.Key, detail string) {
	r.mu.Lock()
	r.notes = append(r.notes, detail)
	r.mu.Unlock()
}

func (r *rec) count(kind workers.Kind, out model.Outcome) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, a := range r.attempts {
		if a.Kind == kind && a.Outcome == out {
			n++
		}
	}
	return n
}

// violationCount is how often inv was reported, repeats of a subject
// included.
func (r *rec) violationCount(inv workers.Invariant) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[inv]
}

func (r *rec) broken(inv workers.Invariant) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.violations[inv])
}

// clean fails t if any invariant was broken.
func (r *rec) clean(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for inv, v := range r.violations {
		t.Errorf("%s broken: %s", inv, strings.Join(v, "; "))
	}
}

func (r *rec) hasNote(sub string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range r.notes {
		if strings.Contains(n, sub) {
			return true
		}
	}
	return false
}

// hooks holds the barriers of a test.
type hooks struct {
	mu   sync.Mutex
	list []*barrier
}

func (h *hooks) at(ctx context.Context, p workers.Point, agent int32) {
	h.mu.Lock()
	list := append([]*barrier(nil), h.list...)
	h.mu.Unlock()
	for _, b := range list {
		b.at(ctx, p, agent)
	}
}

// stop adds a barrier: the first workload to reach point p for agent stops
// there until release is called, or its context ends.
func (h *hooks) stop(t *testing.T, p workers.Point, agent int32) *barrier {
	return h.add(t, &barrier{point: p, agent: agent})
}

// hold is stop for a workload that does not look at its context while it
// is held: it stays at p until release even if its lock is lost meanwhile,
// as a holder busy with work that sends no statement would.
func (h *hooks) hold(t *testing.T, p workers.Point, agent int32) *barrier {
	return h.add(t, &barrier{point: p, agent: agent, deaf: true})
}

func (h *hooks) add(t *testing.T, b *barrier) *barrier {
	b.arrived, b.gate = make(chan struct{}), make(chan struct{})
	t.Cleanup(b.release)
	h.mu.Lock()
	h.list = append(h.list, b)
	h.mu.Unlock()
	return b
}

type barrier struct {
	point   workers.Point
	agent   int32
	deaf    bool // ignores the workload's context
	taken   atomic.Bool
	arrived chan struct{}
	gate    chan struct{}
	once    sync.Once
}

func (b *barrier) at(ctx context.Context, p workers.Point, agent int32) {
	if p != b.point || agent != b.agent || !b.taken.CompareAndSwap(false, true) {
		return
	}
	close(b.arrived)
	if b.deaf {
		<-b.gate
		return
	}
	select {
	case <-b.gate:
	case <-ctx.Done():
	}
}

// wait blocks until a workload stopped at the barrier.
func (b *barrier) wait(t *testing.T) {
	t.Helper()
	select {
	case <-b.arrived:
	case <-time.After(20 * time.Second):
		t.Fatalf("nothing reached %s for agent %d", b.point, b.agent)
	}
}

func (b *barrier) release() { b.once.Do(func() { close(b.gate) }) }

// goErr runs fn on a goroutine and returns a channel with its error.
func goErr(fn func() error) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- fn() }()
	return ch
}

func recv(t *testing.T, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("workload did not finish")
		return nil
	}
}

// The tests here do not run in parallel: AGENT keys are per database, not
// per schema, so parallel tests on agent 1 would wait for each other's
// locks and see each other's waiters.
