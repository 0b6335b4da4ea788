package pgsource

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/locktop/locktop/internal/source/pglocks"

	"github.com/jackc/pgx/v5"
)

// The poll reads pg_class of the monitor's own database only: a relation
// of another database comes back as an oid. A namer names those relations
// in their own databases, asynchronously so that a poll never waits for
// it: a miss shows as "db2 oid 16390" in the poll that meets it, and the
// lookup it starts names it in a later poll. It keeps
//
//   - a cache (database oid, relation oid) → schema.table; every entry is
//     looked up again after namesRetry: a relation not found (dropped, or
//     created by a transaction not yet committed) shows by oid until then,
//     a relation named shows its name as found meanwhile, so a rename
//     shows within namesRetry and a lookup (bp11: the cache was never
//     emptied, and a renamed relation kept its old name);
//   - per database, at most one connection, opened on the first miss with
//     the monitor's settings (read-only, named locktop.monitor, its
//     timeouts) and the database changed, closed after Options.NamesIdle
//     unused; a database without locks of other types is never entered;
//   - one query per batch: the misses of one poll in one database, each
//     unknown object asked for once (misses already asked for are not
//     asked again while the answer is due);
//   - for a database that cannot be entered (no CONNECT privilege, too
//     many connections, dropped) why, said in Snapshot.Partial while its
//     relations are unnamed and logged once per change; it is tried again
//     after namesRetry.
type namer struct {
	cfg   *pgx.ConnConfig // the monitor's: copied with another database
	own   string          // the monitor's database: the poll names its relations
	idle  time.Duration
	bound time.Duration // one lookup: the connection and the query
	log   *slog.Logger
	// slots, when not nil, holds a token per naming connection open: the
	// room the monitor's connection bound (Options.ConnBound, in total)
	// leaves beside its pool.
	slots chan struct{}
	total int32

	mu    sync.Mutex
	names map[relKey]name
	dbs   map[uint32]*dbNamer
	done  chan struct{} // closed by close
	// changed is closed, and replaced, when a lookup ends.
	changed chan struct{}
	// missed: the last apply left a relation to a lookup (queued, in
	// flight, or ended since), so a poll after wait names more.
	missed bool
	wg     sync.WaitGroup
}

// relKey is a relation in a database.
type relKey struct{ db, rel uint32 }

// name is a cached answer: the relation's name, or "" when it was not
// found (to look up again after at).
type name struct {
	text string
	at   time.Time
}

// dbNamer is one database's queue, connection and failure.
type dbNamer struct {
	db      uint32
	name    string
	queue   []uint32            // misses to look up next
	asked   map[uint32]struct{} // queued or in flight
	wake    chan struct{}       // a non-blocking signal that queue has work
	running bool                // a goroutine serves the queue
	failed  string              // why the database could not be entered; "" when it could
	retry   time.Time           // when to try a failed database again
}

// namesRetry is how long a relation's name, or its absence, or a database
// that could not be entered, stands before it is looked up again. A
// variable so that a test can shorten it.
var namesRetry = time.Minute

const (
	// defaultNamesIdle is Options.NamesIdle's default.
	defaultNamesIdle = time.Minute
	// namesSQL names relations by oid in the database it runs in.
	namesSQL = `SELECT c.oid, format('%I.%I', n.nspname, c.relname) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = ANY($1::oid[])`
)

func newNamer(cfg *pgx.ConnConfig, own string, idle, bound time.Duration) *namer {
	if idle <= 0 {
		idle = defaultNamesIdle
	}
	return &namer{cfg: cfg, own: own, idle: idle, bound: bound,
		log:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		names: map[relKey]name{}, dbs: map[uint32]*dbNamer{}, done: make(chan struct{}), changed: make(chan struct{})}
}

// ErrConnBound is why a database's relations stay unnamed when naming
// them would open a connection past Options.ConnBound.
var ErrConnBound = errors.New("locktop's bound of connections to this server is reached")

// limit lets at most free naming connections be open at once, out of
// total for the whole monitor (said in the failure).
func (n *namer) limit(total, free int32) {
	n.slots, n.total = make(chan struct{}, max(free, 0)), total
}

// take reserves a naming connection within the bound; release gives it
// back once the connection is closed.
func (n *namer) take() error {
	if n.slots == nil {
		return nil
	}
	select {
	case n.slots <- struct{}{}:
		return nil
	default:
		return fmt.Errorf("%w (%d)", ErrConnBound, n.total)
	}
}

func (n *namer) release() {
	if n.slots != nil {
		<-n.slots
	}
}

// apply names t's relations of other databases from the cache, queues the
// misses (one batch per database) and returns a line per database whose
// relations stay unnamed because it cannot be entered. It never waits for
// a lookup.
func (n *namer) apply(t *pglocks.Table) (partial []string) {
	now := time.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	var woken []*dbNamer
	n.missed = false
	for i := range t.Others {
		o := &t.Others[i]
		if o.Relation != "" || o.RelationOID == 0 || o.DatabaseOID == 0 || o.Database == "" || o.Database == n.own {
			continue
		}
		k := relKey{o.DatabaseOID, o.RelationOID}
		stale := false // named, a while ago: shown so, and asked again
		if c, ok := n.names[k]; ok {
			if o.Relation = c.text; now.Before(c.at.Add(namesRetry)) {
				continue // named, or not found (shown by oid), lately
			}
			stale = c.text != ""
		}
		d := n.dbs[k.db]
		if d == nil {
			d = &dbNamer{db: k.db, name: o.Database, asked: map[uint32]struct{}{}, wake: make(chan struct{}, 1)}
			n.dbs[k.db] = d
		}
		if d.failed != "" && now.Before(d.retry) {
			if line := "database " + d.name + ": relations not named: " + d.failed; !stale && !slices.Contains(partial, line) {
				partial = append(partial, line)
			}
			continue
		}
		n.missed = n.missed || !stale
		if _, ok := d.asked[k.rel]; ok {
			continue
		}
		d.asked[k.rel] = struct{}{}
		d.queue = append(d.queue, k.rel)
		if !slices.Contains(woken, d) {
			woken = append(woken, d)
		}
	}
	for _, d := range woken {
		n.serve(d)
	}
	return partial
}

// serve wakes d's goroutine, or starts one. Called with n.mu held.
func (n *namer) serve(d *dbNamer) {
	select {
	case <-n.done:
		return
	default:
	}
	if d.running {
		select {
		case d.wake <- struct{}{}:
		default:
		}
		return
	}
	d.running = true
	n.wg.Add(1)
	go n.run(d)
}

// run serves d's queue on one connection, which it closes after n.idle
// without work, and then ends.
func (n *namer) run(d *dbNamer) {
	defer n.wg.Done()
	var conn *pgx.Conn
	closeConn := func() {
		if conn != nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = conn.Close(ctx)
			cancel()
			conn = nil
			n.release()
		}
	}
	defer closeConn()
	idle := time.NewTimer(n.idle)
	defer idle.Stop()
	for {
		n.mu.Lock()
		batch := d.queue
		d.queue = nil
		n.mu.Unlock()
		if len(batch) > 0 {
			conn = n.lookup(d, conn, batch)
			idle.Reset(n.idle)
			continue
		}
		select {
		case <-d.wake:
		case <-n.done:
			return
		case <-idle.C:
			closeConn()
			n.mu.Lock()
			if len(d.queue) == 0 {
				d.running = false
				n.mu.Unlock()
				return
			}
			n.mu.Unlock()
			idle.Reset(n.idle)
		}
	}
}

// lookup names batch in d's database on conn (connecting first when conn
// is nil) and returns the connection to keep: nil after a failure.
func (n *namer) lookup(d *dbNamer, conn *pgx.Conn, batch []uint32) *pgx.Conn {
	ctx, cancel := context.WithTimeout(context.Background(), n.bound)
	defer cancel()
	go func() { // close ends the wait for a server that does not answer
		select {
		case <-n.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	found := map[uint32]string{}
	err := func() error {
		if conn == nil {
			if err := n.take(); err != nil {
				return err
			}
			cfg := n.cfg.Copy()
			cfg.Database = d.name
			c, err := pgx.ConnectConfig(ctx, cfg)
			if err != nil {
				n.release()
				return err
			}
			conn = c
		}
		rows, err := conn.Query(ctx, namesSQL, batch)
		if err != nil {
			return err
		}
		var (
			oid  uint32
			text string
		)
		_, err = pgx.ForEachRow(rows, []any{&oid, &text}, func() error {
			found[oid] = text
			return nil
		})
		return err
	}()
	if err != nil && conn != nil {
		cctx, ccancel := context.WithTimeout(context.Background(), time.Second)
		_ = conn.Close(cctx)
		ccancel()
		conn = nil
		n.release()
	}
	now := time.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, rel := range batch {
		delete(d.asked, rel)
	}
	close(n.changed)
	n.changed = make(chan struct{})
	if err != nil {
		why := err.Error() // the bound: not the server's doing
		if !errors.Is(err, ErrConnBound) {
			why = Describe(err).Error()
		}
		if d.failed != why {
			n.log.Warn("cannot name relations of a database", "database", d.name, "err", why)
		}
		d.failed, d.retry = why, now.Add(namesRetry)
		return nil
	}
	if d.failed != "" {
		n.log.Info("naming relations of a database again", "database", d.name)
		d.failed = ""
	}
	for _, rel := range batch {
		n.names[relKey{d.db, rel}] = name{text: found[rel], at: now}
	}
	return conn
}

// wait returns once no lookup is queued or in flight, or ctx ends, and
// reports whether the last apply left a relation to a lookup (a poll now
// names it): a lookup that ended before wait was called counts too.
func (n *namer) wait(ctx context.Context) (bool, error) {
	n.mu.Lock()
	waited := n.missed
	n.mu.Unlock()
	for {
		n.mu.Lock()
		busy := false
		for _, d := range n.dbs {
			busy = busy || len(d.asked) > 0
		}
		changed := n.changed
		n.mu.Unlock()
		if !busy {
			return waited, nil
		}
		waited = true
		select {
		case <-changed:
		case <-ctx.Done():
			return waited, ctx.Err()
		case <-n.done:
			return waited, nil
		}
	}
}

// close ends every lookup and closes every connection.
func (n *namer) close() {
	n.mu.Lock()
	select {
	case <-n.done:
	default:
		close(n.done)
	}
	n.mu.Unlock()
	n.wg.Wait()
}
