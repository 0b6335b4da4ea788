package lease

import (
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/internal/testenv/pgtest"
)

// A pooled connection whose session ended while it sat idle (a server
// crash or restart, a terminated backend) fails a request before any of it
// is sent; that is not the acquire's or the release's failure, and they go
// on with another connection. Seen failing in locktest's fences across a
// crash: an Acquire right after a crash returned "write failed: ...
// broken pipe".
func TestPostgresDeadIdleConnections(t *testing.T) {
	app := fmt.Sprintf("lease-dead-idle-%d", schemas.Add(1))
	schema := fmt.Sprintf("lease_t%d", schemas.Add(1))
	pool := pgtest.Pool(t, func(c *pgxpool.Config) {
		c.MaxConns = 4
		c.ConnConfig.RuntimeParams["application_name"] = app
	})
	m, err := OpenPostgres(ctxT(t), pool, testOptions(Options{Schema: schema}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	r := Map("dead-idle")
	// endIdle ends the sessions of the Manager's pool while they are idle.
	endIdle := func() {
		t.Helper()
		var n int
		err := pgtest.Conn(t).QueryRow(ctxT(t), `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))
			FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&n)
		if err != nil || n == 0 {
			t.Fatalf("ending the pool's sessions: %v (%d ended)", err, n)
		}
	}
	for _, try := range []bool{false, true} {
		endIdle()
		var l *Lock
		if try {
			l, err = m.TryAcquire(ctxT(t), r, Write)
		} else {
			l, err = m.Acquire(ctxT(t), r, Write)
		}
		if err != nil {
			t.Fatalf("acquire (try %v) on a pool whose sessions ended: %v", try, err)
		}
		endIdle()
		if err := l.Release(ctxT(t)); err != nil {
			t.Fatalf("release on a pool whose sessions ended: %v", err)
		}
	}
}
