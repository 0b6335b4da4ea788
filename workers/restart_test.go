package workers_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/internal/testenv/pgcluster"
	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/workers"
)

// A server restart while a section is inside. On a busy pool the
// connections handed out next are dead (pgxpool pings only those idle for
// a second), so the section's last statements fail: its row must still be
// removed (on a fresh connection), and a row left anyway must not pass for
// a section inside. The live session comes back by itself. The test has a
// server of its own: it restarts it.
func TestRestartLeavesNoFalseOverlap(t *testing.T) {
	ctx := context.Background()
	c, err := pgcluster.Start(ctx, pgcluster.Options{})
	if err != nil {
		t.Fatalf("a server of the test's own: %v", err)
	}
	t.Cleanup(func() { c.Stop() })
	pools := 0
	w := newWorldWith(t, 2, func(t *testing.T, configure func(*pgxpool.Config)) *pgxpool.Pool {
		cfg, err := pgxpool.ParseConfig(c.DSN("postgres"))
		if err != nil {
			t.Fatal(err)
		}
		configure(cfg)
		if pools++; pools == 1 { // the work pool: busy, its idle connections are not pinged
			cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
		}
		p, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		return p
	})
	if err := w.env.Join(ctx); err != nil {
		t.Fatal(err)
	}
	defer w.env.Leave()
	// Several work connections in the pool, as a busy pool has.
	conns := make([]*pgxpool.Conn, 0, 4)
	for range cap(conns) {
		conn, err := w.work.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, conn)
	}
	for _, conn := range conns {
		conn.Release()
	}

	b := w.hooks.stop(t, workers.PointEntered, 1)
	inside := goErr(func() error { return w.env.Hook(ctx, workers.RouteNotification, 1) })
	b.wait(t)
	if err := c.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	b.release()
	if err := recv(t, inside); err == nil {
		t.Log("the section spanning the restart succeeded") // its statements may all have met fresh connections
	}

	// Later sections of the agent: the first ones may meet dead lock
	// connections too; one gets through.
	deadline := time.Now().Add(20 * time.Second)
	for w.env.Hook(ctx, workers.RoutePreToolUse, 1) != nil {
		if time.Now().After(deadline) {
			t.Fatal("no hook got through after the restart")
		}
	}
	if err := w.env.Hook(ctx, workers.RouteSubagentStop, 1); err != nil {
		t.Fatal(err)
	}
	if n := w.rec.broken(workers.InvNoOverlap); n != 0 {
		t.Errorf("%d false overlap(s) after the restart", n)
	}
	pgtest.Eventually(t, "the live session is back", func() bool {
		var n int
		err := w.work.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1",
			workers.LiveAppPrefix+w.env.Proc).Scan(&n)
		return err == nil && n == 1 && w.env.LiveDown() == 0
	})
	if !w.rec.hasNote("live session back") {
		t.Error("the live session's return was not noted")
	}
	if _, err := w.env.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.env.Audit(ctx); err != nil {
		t.Fatal(err)
	}
	w.rec.clean(t)
	var left int
	if err := w.work.QueryRow(ctx, "SELECT count(*) FROM sections").Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("%d section row(s) left", left)
	}
}
