package lease

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/internal/testenv/pgtest"
)

// TestSettleRights (PostgreSQL): settle, as a role with no privilege,
// ends a backend of its own role and waits until it is gone, and on a
// backend of a role it may not end it logs a warning with the server's
// refusal and returns, leaving the backend alone (the acquire then cleans
// up at once, as the README says).
func TestSettleRights(t *testing.T) {
	plain := pgtest.Role(t, fmt.Sprintf("lease_settle_%d", os.Getpid()), "pw-settle")
	other := pgtest.Role(t, fmt.Sprintf("lease_other_%d", os.Getpid()), "pw-other")
	cfg, err := pgxpool.ParseConfig(plain)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(ctxT(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	var logged bytes.Buffer
	p := &pgStore{pool: pool, log: slog.New(slog.NewTextHandler(&logged, nil))}
	connect := func(dsn string) *pgx.Conn {
		c, err := pgx.Connect(ctxT(t), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(ctxT(t)) })
		return c
	}
	alive := func(pid uint32) bool {
		var n int
		if err := pgtest.Conn(t).QueryRow(ctxT(t), "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", int64(pid)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	}

	own := connect(plain).PgConn().PID()
	p.settle(own)
	if alive(own) || logged.Len() > 0 {
		t.Fatalf("settle on a backend of its own role: still alive %v, logged %q", alive(own), logged.String())
	}

	theirs := connect(other).PgConn().PID()
	p.settle(theirs)
	if !alive(theirs) {
		t.Fatal("settle ended a backend of another role")
	}
	if !strings.Contains(logged.String(), "ending the backend of an abandoned request failed") || !strings.Contains(logged.String(), "42501") {
		t.Fatalf("logged %q, want the warning with SQLSTATE 42501", logged.String())
	}
}
