package pgsource_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/internal/source/pgsource"
	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/lockcore/registry"
	"github.com/locktop/locktop/model"
)

// probeRows returns the rows of the health-probe key on the server.
func probeRows(t *testing.T) []model.Lock {
	t.Helper()
	snap, err := pgsource.Inspect(context.Background(), pgtest.Pool(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	var out []model.Lock
	for _, l := range snap.Locks {
		if l.Namespace == "LOCKTOP_HEALTH" {
			out = append(out, l)
		}
	}
	return out
}

func TestProbe(t *testing.T) {
	m := connect(t, pgtest.DSN(t))
	if err := m.Probe(context.Background()); err != nil {
		t.Fatalf("probe on a healthy server: %v", err)
	}
	if rows := probeRows(t); len(rows) != 0 {
		t.Errorf("the probe left its lock behind: %+v", rows)
	}
}

// The probe leaves the monitor's connections as Connect made them: its
// lock_timeout is local to the lock statement.
func TestProbeKeepsConnectionSettings(t *testing.T) {
	ctx := context.Background()
	m := connect(t, pgtest.DSN(t))
	for range 3 {
		if err := m.Probe(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var conns []*pgxpool.Conn
	for range m.Pool().Config().MaxConns {
		c, err := m.Pool().Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		var lt, st, app, ro string
		err := c.QueryRow(ctx, `SELECT current_setting('lock_timeout'), current_setting('statement_timeout'),
			current_setting('application_name'), current_setting('default_transaction_read_only')`).Scan(&lt, &st, &app, &ro)
		if err != nil {
			t.Fatal(err)
		}
		if lt != "500ms" || st != "2s" || app != pgsource.ApplicationName || ro != "on" {
			t.Errorf("after probes: lock_timeout=%s statement_timeout=%s application_name=%s read_only=%s", lt, st, app, ro)
		}
		c.Release()
	}
}

// A role with no privileges at all can still take the probe lock.
func TestProbeAsPlainRole(t *testing.T) {
	m := connect(t, pgtest.Role(t, "probe_plain", "s3cret-probe"))
	if err := m.Probe(context.Background()); err != nil {
		t.Fatalf("probe as a plain role: %v", err)
	}
}

// A monitor connection that died while idle (a restart, a terminated
// backend) does not fail the probe when a fresh connection works.
func TestProbeAfterBackendTerminated(t *testing.T) {
	ctx := context.Background()
	m := connect(t, pgtest.DSN(t))
	if err := m.Probe(ctx); err != nil {
		t.Fatal(err)
	}
	admin := pgtest.Conn(t)
	var n int
	err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name = $1 AND datname = current_database()`, pgsource.ApplicationName).Scan(&n)
	if err != nil || n == 0 {
		t.Fatalf("terminated %d monitor backends: %v", n, err)
	}
	pgtest.Eventually(t, "the backends to end", func() bool {
		var left int
		err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE application_name = $1 AND datname = current_database()`, pgsource.ApplicationName).Scan(&left)
		return err == nil && left == 0
	})
	if err := m.Probe(ctx); err != nil {
		t.Errorf("probe after the monitor's backend was terminated: %v", err)
	}
}

// The probe lock held by another session: the probe waits its second, then
// says so, and leaves nothing queued behind.
func TestProbeLockHeldElsewhere(t *testing.T) {
	ctx := context.Background()
	m := connect(t, pgtest.DSN(t))
	holder := pgtest.Conn(t)
	if _, err := holder.Exec(ctx, "SELECT pg_advisory_lock($1::int8)", registry.HealthProbeID); err != nil {
		t.Fatal(err)
	}
	err := m.Probe(ctx)
	var pe *pgsource.ProbeError
	if !errors.As(err, &pe) || !strings.Contains(pe.Reason, "LOCKTOP_HEALTH not granted within 1s") {
		t.Fatalf("probe with the lock held elsewhere: %v, want a ProbeError saying it was not granted", err)
	}
	if rows := probeRows(t); len(rows) != 1 || !rows[0].Granted {
		t.Errorf("after the failed probe, rows of the key: %+v, want the other holder only", rows)
	}
	if _, err := holder.Exec(ctx, "SELECT pg_advisory_unlock($1::int8)", registry.HealthProbeID); err != nil {
		t.Fatal(err)
	}
	if err := m.Probe(ctx); err != nil {
		t.Errorf("probe after the holder let go: %v", err)
	}
}

// A caller that gives up gets its context's error at once; the probe it
// started still finishes for others and leaves nothing behind.
func TestProbeCallerCancels(t *testing.T) {
	ctx := context.Background()
	m := connect(t, pgtest.DSN(t))
	holder := pgtest.Conn(t)
	if _, err := holder.Exec(ctx, "SELECT pg_advisory_lock($1::int8)", registry.HealthProbeID); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- m.Probe(cctx) }()
	pgtest.Eventually(t, "the probe to queue for its lock", func() bool { return len(probeRows(t)) == 2 })
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled probe: %v, want context.Canceled", err)
	}
	// Joins the probe still under way, or runs another; either fails the
	// same way while the lock is held elsewhere.
	if err := m.Probe(ctx); err == nil {
		t.Error("probe succeeded while the lock was held elsewhere")
	}
	if rows := probeRows(t); len(rows) != 1 {
		t.Errorf("rows of the probe key after the probes: %+v, want the holder only", rows)
	}
}

// A server that stops answering: the probe gives up after its second and
// says the database did not answer; when the server answers again, so does
// the probe.
func TestProbeServerStopsAnswering(t *testing.T) {
	p := pgtest.NewProxy(t, pgtest.DSN(t))
	m := connect(t, p.DSN())
	ctx := context.Background()
	if err := m.Probe(ctx); err != nil {
		t.Fatalf("probe through the proxy: %v", err)
	}
	p.Freeze()
	start := time.Now()
	err := m.Probe(ctx)
	took := time.Since(start)
	var pe *pgsource.ProbeError
	if !errors.As(err, &pe) || pe.Reason != "database did not answer within 1s" {
		t.Errorf("probe of a frozen server: %v", err)
	}
	if took < pgsource.ProbeTimeout {
		t.Errorf("gave up after %s, before its timeout", took)
	}
	p.Thaw()
	pgtest.Eventually(t, "the probe to pass again", func() bool { return m.Probe(ctx) == nil })
}
