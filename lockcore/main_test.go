package lockcore_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/lockcore/registry"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// nextID hands every test its own agent ids, so tests can run in parallel on
// one database without sharing keys.
var nextID atomic.Int32

func freshAgent() lockcore.Key { return lockcore.Pair(registry.SpaceAgent, 1000+nextID.Add(1)) }

// newService returns a Service on a pool of its own with at most maxConns
// connections, and a recorder of its events.
func newService(t *testing.T, maxConns int32, opts ...lockcore.Option) (*lockcore.Service, *recorder) {
	t.Helper()
	pool := pgtest.Pool(t, func(c *pgxpool.Config) { c.MaxConns = maxConns })
	rec := &recorder{}
	return lockcore.New(pool, append([]lockcore.Option{lockcore.Observe(rec.observe)}, opts...)...), rec
}

// recorder keeps every event a Service emits.
type recorder struct {
	mu     sync.Mutex
	events []lockcore.Event
}

func (r *recorder) observe(e lockcore.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

func (r *recorder) count(kind lockcore.EventKind) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.events {
		if e.Kind == kind {
			n++
		}
	}
	return n
}

func (r *recorder) last(kind lockcore.EventKind) (lockcore.Event, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.events) - 1; i >= 0; i-- {
		if r.events[i].Kind == kind {
			return r.events[i], true
		}
	}
	return lockcore.Event{}, false
}

// lockRow is one advisory row of pg_locks for a key, as another session sees it.
type lockRow struct {
	pid     int32
	granted bool
	app     string
}

// rowsFor reads pg_locks for key in the test database.
func rowsFor(t *testing.T, q *pgx.Conn, key lockcore.Key) []lockRow {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	classid, objid, objsubid := int64(uint32(key.Space())), int64(uint32(key.ID())), 1
	if key.IsPair() {
		objsubid = 2
	}
	rows, err := q.Query(ctx, `SELECT l.pid, l.granted, coalesce(a.application_name, '')
		FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE l.locktype = 'advisory' AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
		AND l.classid = $1::int8::oid AND l.objid = $2::int8::oid AND l.objsubid = $3
		ORDER BY l.granted DESC, l.waitstart`, classid, objid, objsubid)
	if err != nil {
		t.Fatalf("reading pg_locks: %v", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (lockRow, error) {
		var l lockRow
		err := r.Scan(&l.pid, &l.granted, &l.app)
		return l, err
	})
	if err != nil {
		t.Fatalf("reading pg_locks: %v", err)
	}
	return out
}

func countGranted(rows []lockRow) (granted, waiting int) {
	for _, r := range rows {
		if r.granted {
			granted++
		} else {
			waiting++
		}
	}
	return
}

// holdElsewhere takes key on a connection of its own and returns a function
// that releases it.
func holdElsewhere(t *testing.T, key lockcore.Key) (release func()) {
	t.Helper()
	conn := pgtest.Conn(t)
	ctx := context.Background()
	var err error
	if key.IsPair() {
		_, err = conn.Exec(ctx, "SELECT pg_advisory_lock($1::int4, $2::int4)", key.Space(), key.ID())
	} else {
		_, err = conn.Exec(ctx, "SELECT pg_advisory_lock($1::int8)", key.Int64())
	}
	if err != nil {
		t.Fatalf("holding %v elsewhere: %v", key, err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			if _, err := conn.Exec(ctx, "SELECT pg_advisory_unlock_all()"); err != nil {
				t.Errorf("releasing %v: %v", key, err)
			}
		})
	}
	t.Cleanup(release)
	return release
}

// backendAlive reports whether a backend with pid exists.
func backendAlive(t *testing.T, q *pgx.Conn, pid uint32) bool {
	t.Helper()
	var n int
	if err := q.QueryRow(context.Background(), "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", int32(pid)).Scan(&n); err != nil {
		t.Fatalf("pg_stat_activity: %v", err)
	}
	return n > 0
}
