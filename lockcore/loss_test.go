package lockcore_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/internal/testenv/pgcluster"
	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/lockcore"
)

// guard bounds a wait that must end; it is a deadlock guard, not a speed
// check.
const guard = 30 * time.Second

// waitDone waits for a lock's Done, failing t if it never closes.
func waitDone(t *testing.T, l *lockcore.Lock, what string) {
	t.Helper()
	select {
	case <-l.Done():
	case <-time.After(guard):
		t.Fatalf("%s: Done not closed within %s", what, guard)
	}
}

// lossEvents is an observer that hands every EventLost to a channel.
type lossEvents chan lockcore.Event

func (c lossEvents) observe(e lockcore.Event) {
	if e.Kind == lockcore.EventLost {
		c <- e
	}
}

// unlockCounter counts the unlock statements a pool sends.
type unlockCounter struct{ n atomic.Int32 }

func (u *unlockCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.Contains(d.SQL, "pg_advisory_unlock") {
		u.n.Add(1)
	}
	return ctx
}

func (u *unlockCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func terminate(t *testing.T, mon *pgx.Conn, pid uint32) {
	t.Helper()
	var ok bool
	if err := mon.QueryRow(context.Background(), "SELECT pg_terminate_backend($1)", int32(pid)).Scan(&ok); err != nil || !ok {
		t.Fatalf("pg_terminate_backend(%d) = %v, %v", pid, ok, err)
	}
}

// A backend terminated while its lock is held: the loss is seen at once,
// before any Release: Done closes, the context's cause wraps ErrLost, Err
// wraps ErrLost, the observer gets EventLost, the connection leaves the
// pool. Release then reports the loss and sends nothing.
func TestLossOnTerminate(t *testing.T) {
	t.Parallel()
	unlocks := &unlockCounter{}
	pool := pgtest.Pool(t, func(c *pgxpool.Config) { c.MaxConns = 2; c.ConnConfig.Tracer = unlocks })
	lost := make(lossEvents, 1)
	s := lockcore.New(pool, lockcore.Observe(lost.observe))
	mon := pgtest.Conn(t)
	key := freshAgent()
	l, err := s.Acquire(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if l.Err() != nil {
		t.Fatalf("Err() = %v while held", l.Err())
	}
	terminate(t, mon, l.PID())
	waitDone(t, l, "terminated backend")
	if cause := context.Cause(l.Context()); !errors.Is(cause, lockcore.ErrLost) {
		t.Errorf("context cause = %v, want ErrLost", cause)
	}
	var lerr *lockcore.AdvisoryLockError
	if err := l.Err(); !errors.Is(err, lockcore.ErrLost) || !errors.As(err, &lerr) || lerr.Op != lockcore.OpHold {
		t.Errorf("Err() = %v, want ErrLost from OpHold", err)
	}
	var pgErr *pgconn.PgError
	if !errors.As(l.Err(), &pgErr) || pgErr.Code != "57P01" {
		t.Errorf("Err() = %v, want the server's 57P01 inside", l.Err())
	}
	select {
	case e := <-lost:
		if e.Key != key || e.PID != l.PID() || !errors.Is(e.Err, lockcore.ErrLost) {
			t.Errorf("EventLost %+v", e)
		}
	case <-time.After(guard):
		t.Fatal("no EventLost before Release")
	}
	if s.Held() != 0 || pool.Stat().AcquiredConns() != 0 {
		t.Errorf("after the loss: held %d, connections checked out %d", s.Held(), pool.Stat().AcquiredConns())
	}
	before := unlocks.n.Load()
	err = l.Release(context.Background())
	if !errors.Is(err, lockcore.ErrLost) || !errors.As(err, &lerr) || lerr.Op != lockcore.OpRelease {
		t.Errorf("Release after the loss = %v, want ErrLost from OpRelease", err)
	}
	if n := unlocks.n.Load() - before; n != 0 {
		t.Errorf("Release after the loss sent %d unlock(s), want none", n)
	}
	if !errors.Is(l.Err(), lockcore.ErrLost) {
		t.Errorf("Err() after Release = %v, want still the loss", l.Err())
	}
	select {
	case e := <-lost:
		t.Errorf("a second EventLost: %+v", e)
	default:
	}
	// The key is free on the server, and the Service takes it again.
	l2, err := s.Acquire(context.Background(), key)
	if err != nil {
		t.Fatalf("re-acquire after the loss: %v", err)
	}
	if err := l2.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// Done closes only once the lock's context has its cause: whoever sees
// Done closed finds the cause wraps ErrLost. The observer holds the watch
// between recording the loss and cancelling the context (observers hear of
// a loss first), and the first call of Done comes in that moment, as it did
// in ExampleLock_Done on a loaded machine ("lost: false": Done handed out
// the closed channel of an ended lock whose context was not cancelled yet).
func TestDoneWaitsForTheCause(t *testing.T) {
	t.Parallel()
	entered, proceed := make(chan struct{}), make(chan struct{})
	s, _ := newService(t, 2, lockcore.Observe(func(e lockcore.Event) {
		if e.Kind == lockcore.EventLost {
			close(entered)
			<-proceed
		}
	}))
	mon := pgtest.Conn(t)
	l, err := s.Acquire(context.Background(), freshAgent())
	if err != nil {
		t.Fatal(err)
	}
	terminate(t, mon, l.PID())
	select {
	case <-entered:
	case <-time.After(guard):
		close(proceed)
		t.Fatalf("no EventLost within %s", guard)
	}
	select {
	case <-l.Done():
		if cause := context.Cause(l.Context()); !errors.Is(cause, lockcore.ErrLost) {
			t.Errorf("Done closed with the context's cause %v, want ErrLost", cause)
		}
	default:
	}
	close(proceed)
	waitDone(t, l, "terminated backend")
	if cause := context.Cause(l.Context()); !errors.Is(cause, lockcore.ErrLost) {
		t.Errorf("context cause = %v, want ErrLost", cause)
	}
	if err := l.Release(context.Background()); !errors.Is(err, lockcore.ErrLost) {
		t.Errorf("Release = %v, want ErrLost", err)
	}
}

// A released lock: Done closed, cause and Err ErrReleased.
func TestReleasedLockState(t *testing.T) {
	t.Parallel()
	s, rec := newService(t, 2)
	l, err := s.Acquire(context.Background(), freshAgent())
	if err != nil {
		t.Fatal(err)
	}
	done := l.Done()
	select {
	case <-done:
		t.Fatal("Done closed while held")
	default:
	}
	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	default:
		t.Error("Done (asked for before Release) open after Release")
	}
	select {
	case <-l.Done():
	default:
		t.Error("Done (asked for after Release) open")
	}
	if l.Err() != lockcore.ErrReleased || context.Cause(l.Context()) != lockcore.ErrReleased {
		t.Errorf("Err = %v, cause = %v; want ErrReleased", l.Err(), context.Cause(l.Context()))
	}
	if rec.count(lockcore.EventLost) != 0 || rec.count(lockcore.EventReleased) != 1 {
		t.Errorf("events: %d lost, %d released", rec.count(lockcore.EventLost), rec.count(lockcore.EventReleased))
	}
}

// The acquire's context ending does not end the hold: Done stays open and
// the lock is released as usual.
func TestAcquireContextEndingKeepsLock(t *testing.T) {
	t.Parallel()
	s, _ := newService(t, 2)
	mon := pgtest.Conn(t)
	ctx, cancel := context.WithCancel(context.Background())
	key := freshAgent()
	l, err := s.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	<-l.Context().Done() // derived from ctx
	select {
	case <-l.Done():
		t.Fatal("Done closed by the acquire's context")
	default:
	}
	if l.Err() != nil {
		t.Errorf("Err = %v", l.Err())
	}
	if g, _ := countGranted(rowsFor(t, mon, key)); g != 1 {
		t.Errorf("%d granted rows", g)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// The body of With gets a context cancelled with cause ErrLost when the
// lock is lost, while the body still runs; With returns ErrLost.
func TestWithBodyCancelledOnLoss(t *testing.T) {
	t.Parallel()
	s, rec := newService(t, 2)
	mon := pgtest.Conn(t)
	key := freshAgent()
	err := s.With(context.Background(), key, func(ctx context.Context) error {
		pid, _ := lockcore.HolderPID(ctx, key)
		terminate(t, mon, pid)
		select {
		case <-ctx.Done():
		case <-time.After(guard):
			t.Fatal("body context not cancelled after the loss")
		}
		if !errors.Is(context.Cause(ctx), lockcore.ErrLost) {
			t.Errorf("cause = %v, want ErrLost", context.Cause(ctx))
		}
		if rec.count(lockcore.EventLost) != 1 {
			t.Errorf("EventLost count in the body = %d, want 1", rec.count(lockcore.EventLost))
		}
		return ctx.Err()
	})
	if !errors.Is(err, lockcore.ErrLost) || !errors.Is(err, context.Canceled) {
		t.Errorf("With = %v, want the body's context.Canceled and ErrLost", err)
	}
	if lockcore.Classify(err) != lockcore.EventLost {
		t.Errorf("Classify(%v) = %v", err, lockcore.Classify(err))
	}
	if rec.count(lockcore.EventLost) != 1 || rec.count(lockcore.EventReleased) != 0 {
		t.Errorf("events: lost %d, released %d", rec.count(lockcore.EventLost), rec.count(lockcore.EventReleased))
	}
}

// A server restart (fast shutdown) loses every lock held on it at once;
// after it, the Service takes locks again, on fresh connections, although
// its pool still held connections that died idle.
func TestLossOnRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, err := pgcluster.Start(ctx, pgcluster.Options{})
	if err != nil {
		t.Fatalf("a cluster of the test's own: %v", err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	cfg, err := pgxpool.ParseConfig(c.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 6
	cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	rec := &recorder{}
	s := lockcore.New(pool, lockcore.Observe(rec.observe))
	// Five connections: three hold locks, two sit idle in the pool, and the
	// restart kills them all.
	var locks []*lockcore.Lock
	for range 5 {
		l, err := s.Acquire(ctx, freshAgent())
		if err != nil {
			t.Fatal(err)
		}
		locks = append(locks, l)
	}
	for _, l := range locks[3:] {
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	locks = locks[:3]
	if err := c.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	for i, l := range locks {
		waitDone(t, l, "restart")
		if !errors.Is(context.Cause(l.Context()), lockcore.ErrLost) || !errors.Is(l.Err(), lockcore.ErrLost) {
			t.Errorf("lock %d: cause %v, Err %v; want ErrLost", i, context.Cause(l.Context()), l.Err())
		}
		if err := l.Release(ctx); !errors.Is(err, lockcore.ErrLost) {
			t.Errorf("lock %d: Release = %v, want ErrLost", i, err)
		}
	}
	if n := rec.count(lockcore.EventLost); n != 3 {
		t.Errorf("%d EventLost, want 3", n)
	}
	// The pool's idle connections died with the server: the next acquire
	// must not fail on them.
	l, err := s.Acquire(ctx, freshAgent())
	if err != nil {
		t.Fatalf("acquire after the restart: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n := rec.count(lockcore.EventFailed); n != 0 {
		t.Errorf("%d failed acquires after the restart", n)
	}
}

// Lock connections killed while idle in the pool (pgxpool does not ping a
// connection idle for less than a second, and ShouldPing may be off): the
// next acquires go on with fresh connections within their timeout, blocking
// and try alike.
func TestRetryAfterIdleConnectionsKilled(t *testing.T) {
	t.Parallel()
	const conns = 4
	pool := pgtest.Pool(t, func(c *pgxpool.Config) {
		c.MaxConns = conns
		c.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	})
	rec := &recorder{}
	s := lockcore.New(pool, lockcore.Observe(rec.observe))
	mon := pgtest.Conn(t)
	ctx := context.Background()
	for _, try := range []bool{false, true} {
		// Open conns connections, all idle in the pool afterwards.
		var held []*lockcore.Lock
		for range conns {
			l, err := s.Acquire(ctx, freshAgent())
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, l)
		}
		killed := map[uint32]bool{}
		for _, l := range held {
			killed[l.PID()] = true
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		for pid := range killed {
			terminate(t, mon, pid)
		}
		pgtest.Eventually(t, "the idle lock connections' backends are gone", func() bool {
			for pid := range killed {
				if backendAlive(t, mon, pid) {
					return false
				}
			}
			return true
		})
		var pid uint32
		key := freshAgent()
		body := func(ctx context.Context) error { pid, _ = lockcore.HolderPID(ctx, key); return nil }
		var err error
		if try {
			var ok bool
			ok, err = s.TryWith(ctx, key, body)
			if !ok && err == nil {
				t.Error("TryWith did not acquire a free key")
			}
		} else {
			err = s.With(ctx, key, body, lockcore.Wait(5*time.Second))
		}
		if err != nil {
			t.Fatalf("try=%v: acquire after the idle connections were killed: %v", try, err)
		}
		if pid == 0 || killed[pid] {
			t.Errorf("try=%v: held on pid %d, a killed one", try, pid)
		}
	}
	if n := rec.count(lockcore.EventFailed); n != 0 {
		t.Errorf("%d failed acquires", n)
	}
}

// Messages a live session may send while idle (notifications, notices,
// parameter changes) are not a loss; and one cut short by Release's read
// deadline is finished by the unlock's read, nothing lost.
func TestNoFalseLoss(t *testing.T) {
	t.Parallel()
	inj := newInjector(t)
	notified := make(chan struct{}, 8)
	noticed := make(chan string, 8)
	pool := pgtest.Pool(t, func(c *pgxpool.Config) {
		c.MaxConns = 1
		c.ConnConfig.DialFunc = inj.dial
		c.ConnConfig.OnNotification = func(*pgconn.PgConn, *pgconn.Notification) { notified <- struct{}{} }
		c.ConnConfig.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) { noticed <- n.Message }
		c.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
			_, err := conn.Exec(ctx, "LISTEN lockcore_no_false_loss")
			return err
		}
	})
	rec := &recorder{}
	s := lockcore.New(pool, lockcore.Observe(rec.observe))
	mon := pgtest.Conn(t)
	ctx := context.Background()
	recv := func(what string, ch <-chan struct{}) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(guard):
			t.Fatalf("%s never reached the lock connection", what)
		}
	}
	key := freshAgent()
	l, err := s.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	// A notification from the server itself.
	if _, err := mon.Exec(ctx, "NOTIFY lockcore_no_false_loss"); err != nil {
		t.Fatal(err)
	}
	recv("the notification", notified)
	// A parameter change and a notice, as the server would send them.
	inj.inject(t, parameterStatus("application_name", "renamed"), notice("first"))
	if got := <-noticed; got != "first" {
		t.Fatalf("notice %q", got)
	}
	if err := l.Err(); err != nil {
		t.Fatalf("lock reported lost after asynchronous messages: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}

	// Half a notice reaches the watch; Release stops it in the middle of
	// the message; the rest arrives before the unlock's answer.
	l, err = s.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	msg := notice("cut in two")
	inj.inject(t, msg[:7]) // returns once the watch has read it
	inj.hold()
	released := make(chan error, 1)
	go func() { released <- l.Release(ctx) }()
	inj.inject(t, msg[7:]) // read by Release, ahead of the unlock's answer
	inj.resume()
	if err := <-released; err != nil {
		t.Fatalf("Release with half a message pending: %v", err)
	}
	if got := <-noticed; got != "cut in two" {
		t.Errorf("notice %q", got)
	}
	if rows := rowsFor(t, mon, key); len(rows) != 0 {
		t.Errorf("key still held: %+v", rows)
	}
	if n := rec.count(lockcore.EventLost); n != 0 {
		t.Errorf("%d EventLost", n)
	}
}

// injector relays lock connections to the test server through an in-memory
// pipe, so a test can slip server messages in while a connection is idle.
type injector struct {
	mu    sync.Mutex // held while a chunk from the server, or an injection, is written
	held  bool       // hold has taken mu (only the test's goroutine reads it)
	conns []*pipeConn
	wg    sync.WaitGroup
}

type pipeConn struct{ app, relay, server net.Conn }

func newInjector(t *testing.T) *injector {
	inj := &injector{}
	t.Cleanup(func() {
		inj.mu.Lock()
		for _, c := range inj.conns {
			c.app.Close()
			c.relay.Close()
			c.server.Close()
		}
		inj.mu.Unlock()
		inj.wg.Wait()
	})
	return inj
}

// dial is the pool's DialFunc: a pipe whose far end relays to the server.
func (inj *injector) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	server, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	app, relay := net.Pipe()
	inj.mu.Lock()
	inj.conns = append(inj.conns, &pipeConn{app, relay, server})
	inj.mu.Unlock()
	inj.wg.Go(func() { _, _ = io.Copy(server, relay) })
	inj.wg.Go(func() {
		buf := make([]byte, 32<<10)
		for {
			n, err := server.Read(buf)
			if n > 0 {
				inj.mu.Lock()
				_, werr := relay.Write(buf[:n])
				inj.mu.Unlock()
				if werr != nil {
					return
				}
			}
			if err != nil {
				relay.Close()
				return
			}
		}
	})
	return app, nil
}

// hold stops the server's bytes from reaching the client until resume.
func (inj *injector) hold() { inj.mu.Lock(); inj.held = true }

func (inj *injector) resume() { inj.held = false; inj.mu.Unlock() }

// inject writes msgs to the client end of the (one) connection, and
// returns once the client has read them all.
func (inj *injector) inject(t *testing.T, msgs ...[]byte) {
	t.Helper()
	if !inj.held {
		inj.mu.Lock()
		defer inj.mu.Unlock()
	}
	if len(inj.conns) != 1 {
		t.Fatalf("injector has %d connections, want 1", len(inj.conns))
	}
	if _, err := inj.conns[0].relay.Write(bytes.Join(msgs, nil)); err != nil {
		t.Fatal(err)
	}
}

func parameterStatus(name, value string) []byte {
	b, err := (&pgproto3.ParameterStatus{Name: name, Value: value}).Encode(nil)
	if err != nil {
		panic(err)
	}
	return b
}

func notice(msg string) []byte {
	b, err := (&pgproto3.NoticeResponse{Severity: "NOTICE", SeverityUnlocalized: "NOTICE", Code: "00000", Message: msg}).Encode(nil)
	if err != nil {
		panic(err)
	}
	return b
}
