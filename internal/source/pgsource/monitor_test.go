package pgsource_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/locktop/locktop/internal/source/pgsource"
	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/lockcore/registry"
	"github.com/locktop/locktop/model"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func connect(t *testing.T, dsn string) *pgsource.Monitor {
	t.Helper()
	m, err := pgsource.Connect(context.Background(), dsn, pgsource.Options{})
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(m.Close)
	return m
}

func rowsOf(snap model.Snapshot, label string) []model.Lock {
	var out []model.Lock
	for _, l := range snap.Locks {
		if l.KeyLabel() == label {
			out = append(out, l)
		}
	}
	return out
}

func TestPollTracksHeldTimeAndNewWaits(t *testing.T) {
	m := connect(t, pgtest.DSN(t))
	ctx := context.Background()
	key := lockcore.Pair(registry.SpaceAgent, 4242)
	holder := pgtest.Conn(t)
	if _, err := holder.Exec(ctx, "SELECT pg_advisory_lock(1, 4242)"); err != nil {
		t.Fatal(err)
	}
	s1, err := m.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r1 := rowsOf(s1, key.String())
	// The holder's session is idle: it has held the lock at least since it
	// went idle, already on the first poll.
	if len(r1) != 1 || r1[0].Session().StateChange.IsZero() || !r1[0].HeldSince.Equal(r1[0].Session().StateChange) ||
		r1[0].Held(s1.Taken) != s1.Taken.Sub(r1[0].Session().StateChange) || s1.NewWaits != 0 || s1.Latency <= 0 {
		t.Fatalf("first poll: %+v (new waits %d)", r1, s1.NewWaits)
	}

	waiter := pgtest.Conn(t)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = waiter.Exec(wctx, "SELECT pg_advisory_lock(1, 4242)")
	}()
	t.Cleanup(func() { cancel(); <-done })

	var s2 model.Snapshot
	deadline := time.Now().Add(20 * time.Second)
	for {
		if s2, err = m.Poll(ctx); err != nil {
			t.Fatal(err)
		}
		if len(rowsOf(s2, key.String())) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the waiter never showed up")
		}
	}
	r2 := rowsOf(s2, key.String())
	if !r2[0].HeldSince.Equal(r1[0].HeldSince) || r2[0].Held(s2.Taken) != s2.Taken.Sub(r1[0].HeldSince) {
		t.Errorf("held since %v (held %v), want %v as on the first poll", r2[0].HeldSince, r2[0].Held(s2.Taken), r1[0].HeldSince)
	}
	// The monitor sees the whole server, which other packages' tests share:
	// their waits count too, so NewWaits is held to the waits each poll
	// shows that the last did not (ours among them on the second poll).
	if n := waitsNew(s1, s2); s2.NewWaits != n || n < 1 || s2.Interval <= 0 {
		t.Errorf("new waits %d, interval %v; want %d (the waiter's among them) and > 0", s2.NewWaits, s2.Interval, n)
	}
	s3, err := m.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := waitsNew(s2, s3); s3.NewWaits != n {
		t.Errorf("the same wait counted again: %d new waits, want %d", s3.NewWaits, n)
	}
}

// waitsNew counts cur's waits (a backend waiting on a key) that prev did
// not show.
func waitsNew(prev, cur model.Snapshot) int {
	type wait struct {
		pid int32
		key model.KeyID
	}
	had := map[wait]bool{}
	for i := range prev.Locks {
		if l := &prev.Locks[i]; !l.Granted {
			had[wait{l.PID, l.KeyID()}] = true
		}
	}
	n := 0
	for i := range cur.Locks {
		if l := &cur.Locks[i]; !l.Granted && !had[wait{l.PID, l.KeyID()}] {
			n++
		}
	}
	return n
}

// The monitor's connection is read-only, named, and has its own timeouts,
// all from the start-up packet.
func TestConnectionSettings(t *testing.T) {
	m := connect(t, pgtest.DSN(t))
	ctx := context.Background()
	var app, ro, st, lt string
	err := m.Pool().QueryRow(ctx, `SELECT current_setting('application_name'), current_setting('default_transaction_read_only'),
		current_setting('statement_timeout'), current_setting('lock_timeout')`).Scan(&app, &ro, &st, &lt)
	if err != nil {
		t.Fatal(err)
	}
	if app != pgsource.ApplicationName || ro != "on" || st != "2s" || lt != "500ms" {
		t.Errorf("application_name=%q read_only=%q statement_timeout=%q lock_timeout=%q", app, ro, st, lt)
	}
	_, err = m.Pool().Exec(ctx, "CREATE TABLE monitor_must_not_write (x int)")
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "25006" {
		t.Errorf("write on the monitor connection: %v, want read_only_sql_transaction", err)
	}
	info := m.Info()
	if info.Version == "" || info.MaxConnections == 0 || !info.Privileged || info.Warning != "" {
		t.Errorf("info %+v", info)
	}
}

func TestPrivileges(t *testing.T) {
	mon := connect(t, pgtest.Role(t, "mon_only", "s3cret-mon", "pg_monitor"))
	if info := mon.Info(); !info.Privileged || info.Warning != "" || info.User != "mon_only" {
		t.Errorf("pg_monitor role: %+v", info)
	}
	plain := connect(t, pgtest.Role(t, "plain_role", "s3cret-plain"))
	info := plain.Info()
	if info.Privileged || !strings.Contains(info.Warning, "pg_monitor") {
		t.Errorf("plain role: %+v, want a warning naming pg_monitor", info)
	}
	// Without pg_monitor the poll still works.
	if _, err := plain.Poll(context.Background()); err != nil {
		t.Errorf("poll as a plain role: %v", err)
	}
}

func TestConnectErrors(t *testing.T) {
	good := pgtest.Role(t, "pw_role", "right-password")
	wrong, err := pgtest.WithUser(pgtest.DSN(t), "pw_role", "wrong-password-xyz")
	if err != nil {
		t.Fatal(err)
	}
	m, err := pgsource.Connect(context.Background(), good, pgsource.Options{})
	if err != nil {
		t.Fatalf("right password: %v", err)
	}
	m.Close()
	noDB, _ := pgtest.WithDatabase(pgtest.DSN(t), "no_such_db_here")
	for _, tc := range []struct {
		name, dsn string
		kind      pgsource.Kind
		secret    string
	}{
		{"bad DSN", "postgres://u:hunter2@host:notaport/db", pgsource.KindBadDSN, "hunter2"},
		{"unreachable", "host=" + t.TempDir() + " user=x password=hunter3 connect_timeout=2", pgsource.KindUnreachable, "hunter3"},
		{"wrong password", wrong, pgsource.KindAuth, "wrong-password-xyz"},
		{"no database", noDB, pgsource.KindNoDatabase, ""},
	} {
		_, err := pgsource.Connect(context.Background(), tc.dsn, pgsource.Options{})
		var ce *pgsource.ConnectError
		if !errors.As(err, &ce) || ce.Kind != tc.kind {
			t.Errorf("%s: err = %v (%T), want kind %d", tc.name, err, err, tc.kind)
			continue
		}
		msg := err.Error()
		if strings.Contains(msg, "\n") || (tc.secret != "" && strings.Contains(msg, tc.secret)) {
			t.Errorf("%s: message %q has a newline or the password", tc.name, msg)
		}
		fmt.Fprintf(os.Stderr, "%s: %s\n", tc.name, msg)
	}
}

// A backend that releases and takes the key again between polls is not
// reported as one long hold, whether its session is idle or busy.
func TestHeldTimeRestartsOnRetake(t *testing.T) {
	m := connect(t, pgtest.DSN(t))
	ctx := context.Background()
	key := lockcore.Pair(registry.SpaceAgent, 4243)
	holder := pgtest.Conn(t)
	if _, err := holder.Exec(ctx, "SELECT pg_advisory_lock(1, 4243)"); err != nil {
		t.Fatal(err)
	}
	s1, err := m.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	first := rowsOf(s1, key.String())[0].HeldSince
	// Let go and take it again in one statement, then keep the session busy
	// so the idle bound does not apply.
	var at time.Time
	if err := holder.QueryRow(ctx, "SELECT now() FROM (SELECT pg_advisory_unlock(1, 4243), pg_advisory_lock(1, 4243)) x").Scan(&at); err != nil {
		t.Fatal(err)
	}
	busy, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _, _ = holder.Exec(busy, "SELECT pg_sleep(30)") }()
	t.Cleanup(func() { cancel(); <-done })
	var r []model.Lock
	for deadline := time.Now().Add(20 * time.Second); ; {
		s2, err := m.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		r = rowsOf(s2, key.String())
		if len(r) == 1 && r[0].Session().State == "active" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the holder never showed as busy: %+v", r)
		}
	}
	if !r[0].HeldSince.After(at) || !r[0].HeldSince.After(first) {
		t.Errorf("held since %v: counted across the re-take at %v (first seen %v)", r[0].HeldSince, at, first)
	}
}

// A server that stops answering does not hold a poll past statement_timeout
// and a grace, and a poll waiting behind it gives up with its context.
func TestPollBoundedOnSilentServer(t *testing.T) {
	p := pgtest.NewProxy(t, pgtest.DSN(t))
	// The bound is the default statement timeout; a shorter one failed the warm-up poll below on a
	// loaded CI machine (canceled by the server, SQLSTATE 57014) before the proxy froze.
	m, err := pgsource.Connect(context.Background(), p.DSN(), pgsource.Options{StatementTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	defer p.Thaw() // before Close, which waits for a stuck connection
	if _, err := m.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	p.Freeze()
	first := make(chan error, 1)
	go func() { _, err := m.Poll(context.Background()); first <- err }()
	// A second poll queues behind the first and leaves when its context ends.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := m.Poll(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("queued poll: %v, want its context's deadline", err)
	}
	select {
	case err := <-first:
		if err == nil {
			t.Error("a poll of a silent server succeeded")
		}
	case <-time.After(30 * time.Second): // a deadlock guard, not a speed check
		t.Fatal("a poll of a silent server still waiting after 30s")
	}
}

// The connection count does not depend on the role's privileges.
func TestConnectionsForPlainRole(t *testing.T) {
	super := connect(t, pgtest.DSN(t))
	plain := connect(t, pgtest.Role(t, "count_plain", "pw-count"))
	a, err := super.Poll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	b, err := plain.Poll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if a.Connections < 2 || b.Connections < a.Connections-1 {
		t.Errorf("connections: superuser sees %d, plain role %d", a.Connections, b.Connections)
	}
}

// A session the server shows unchanged keeps its *model.Backend from poll
// to poll (a poll of an unchanged server converts no session); one that
// changed gets a new one, and the earlier poll's is left as it was.
func TestPollKeepsUnchangedSessions(t *testing.T) {
	m := connect(t, pgtest.DSN(t))
	ctx := context.Background()
	idle, busy := pgtest.Conn(t), pgtest.Conn(t)
	if _, err := idle.Exec(ctx, "SELECT pg_advisory_lock(1, 4244)"); err != nil {
		t.Fatal(err)
	}
	if _, err := busy.Exec(ctx, "SELECT pg_advisory_lock(1, 4245)"); err != nil {
		t.Fatal(err)
	}
	idleKey, busyKey := lockcore.Pair(registry.SpaceAgent, 4244).String(), lockcore.Pair(registry.SpaceAgent, 4245).String()
	s1, err := m.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := busy.Exec(ctx, "SELECT 'the busy session ran this'"); err != nil {
		t.Fatal(err)
	}
	s2, err := m.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	i1, i2, b1, b2 := rowsOf(s1, idleKey), rowsOf(s2, idleKey), rowsOf(s1, busyKey), rowsOf(s2, busyKey)
	if len(i1) != 1 || len(i2) != 1 || len(b1) != 1 || len(b2) != 1 {
		t.Fatalf("rows: %d %d %d %d, want one each", len(i1), len(i2), len(b1), len(b2))
	}
	if i1[0].Backend != i2[0].Backend {
		t.Errorf("the unchanged session's second poll has a new *Backend: %+v, was %+v", i2[0].Backend, i1[0].Backend)
	}
	if b1[0].Backend == b2[0].Backend || !strings.Contains(b2[0].Query, "the busy session ran this") {
		t.Errorf("the session that ran a statement: %+v", b2[0].Backend)
	}
	if !strings.Contains(b1[0].Query, "pg_advisory_lock") {
		t.Errorf("the first poll's session was written since: %+v", b1[0].Backend)
	}
}
