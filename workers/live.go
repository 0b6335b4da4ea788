package workers

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/locktop/locktop/lockcore"
)

// LiveAppPrefix begins the application_name of a process's live session
// (see Env.Join); the rest is the process's Proc token.
const LiveAppPrefix = "locktop.live "

// KindLive is the kind the live session's notes (lost, back) carry; it is
// not a worker and has no counters.
const KindLive Kind = "live"

// maxAppName is PostgreSQL's limit on application_name (NAMEDATALEN - 1):
// a longer name is cut, and would no longer match its Proc.
const maxAppName = 63

// liveSession is the goroutine that keeps the live session connected.
type liveSession struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func (l *liveSession) stop() {
	if l == nil {
		return
	}
	l.cancel()
	select {
	case <-l.done:
	case <-time.After(cleanupTimeout):
	}
}

// Join opens this process's live session: a connection of its own to the
// work pool's database, named LiveAppPrefix + Proc, kept open until Leave.
// While it is connected, other processes count this process's critical
// sections in their overlap check; once it is gone (Leave, a crash, kill
// -9: the server ends the session when the client's socket closes) they
// ignore them, so the rows a killed process leaves behind are never taken
// for sections still inside. A process that never joins is seen by no
// other process; its own sections always count for itself.
//
// When the session breaks while the process lives (a server restart, the
// backend terminated) it is opened again, retrying with a backoff of up to
// a second until Leave; LiveDown says for how long it has been down. The
// break and the return are reported as notes (KindLive).
func (e *Env) Join(ctx context.Context) error {
	name := LiveAppPrefix + e.Proc
	if len(name) > maxAppName {
		return fmt.Errorf("workers: process token %q is too long for an application_name", e.Proc)
	}
	cfg := e.DB.Pool().Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = name
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("workers: opening the live session: %w", err)
	}
	lctx, cancel := context.WithCancel(context.Background())
	ls := &liveSession{cancel: cancel, done: make(chan struct{})}
	e.liveMu.Lock()
	old := e.live
	e.live = ls
	e.liveMu.Unlock()
	old.stop()
	e.liveDown.Store(0)
	go e.keepLive(lctx, cfg, conn, ls.done)
	return nil
}

// keepLive holds conn open until ctx ends, opening it again whenever it
// breaks.
func (e *Env) keepLive(ctx context.Context, cfg *pgx.ConnConfig, conn *pgx.Conn, done chan struct{}) {
	defer close(done)
	for {
		// Nothing is listened for, so this returns only when the
		// connection breaks or ctx ends: no polling.
		_, err := conn.WaitForNotification(ctx)
		closeConn(conn)
		if ctx.Err() != nil {
			return
		}
		e.liveDown.CompareAndSwap(0, time.Now().UnixNano())
		e.Rec.Note(KindLive, lockcore.Key{}, "live session lost ("+oneLine(err)+"): reconnecting")
		for backoff := 50 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
			if Pause(ctx, backoff) != nil {
				return
			}
			if conn, err = pgx.ConnectConfig(ctx, cfg); err == nil {
				break
			}
		}
		if at := e.liveDown.Swap(0); at != 0 {
			e.Rec.Note(KindLive, lockcore.Key{}, fmt.Sprintf("live session back after %s", time.Since(time.Unix(0, at)).Round(time.Millisecond)))
		}
	}
}

func closeConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = conn.Close(ctx)
}

// LiveDown returns how long the live session has been down and not yet
// back (0 while it is up, or before Join): how long the server has been
// out of reach, as this process sees it.
func (e *Env) LiveDown() time.Duration {
	if at := e.liveDown.Load(); at != 0 {
		return time.Since(time.Unix(0, at))
	}
	return 0
}

// Leave closes the live session, if one is open. From then on other
// processes ignore this process's sections.
func (e *Env) Leave() {
	e.liveMu.Lock()
	ls := e.live
	e.live = nil
	e.liveMu.Unlock()
	ls.stop()
	e.liveDown.Store(0)
}

// oneLine is err's text on one line.
func oneLine(err error) string {
	if err == nil {
		return "closed"
	}
	b := []byte(err.Error())
	for i, c := range b {
		if c == '\n' {
			b[i] = ' '
		}
	}
	return string(b)
}
