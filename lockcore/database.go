package lockcore

import (
	"context"
	"runtime"
	"sync"
	"time"
	"weak"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/lockcore/internal/pgident"
)

// A database's identity is what the server says it is (pgident): the
// cluster's system identifier and the database's oid. Reentrancy and
// Service.FenceOf judge "the same database" by it, as the locks themselves
// do, and it is an advisory lock's store (Entry.Store).

// identities caches each pool's database identity: read once per pool, and
// shared by every Service on that pool. Entries go when their pool does.
var identities sync.Map // weak.Pointer[pgxpool.Pool] -> string

// database returns s's database identity, or "" until its pool has served
// a first acquire.
func (s *Service) database() string {
	if id := s.db.Load(); id != nil {
		return *id
	}
	v, ok := identities.Load(weak.Make(s.pool))
	if !ok {
		return ""
	}
	id := v.(string)
	s.db.Store(&id)
	return id
}

// identify reads the identity of conn's database on s's first acquire
// (unless another Service on the same pool has): one statement, once per
// pool, as long as the role may read pg_control_system.
func (s *Service) identify(ctx context.Context, conn *pgxpool.Conn, deadline time.Time) error {
	if s.database() != "" {
		return nil
	}
	var id string
	err := s.query(ctx, conn, deadline, func(qctx context.Context) error {
		var err error
		id, err = pgident.Fast(qctx, conn.Conn())
		return err
	})
	if err != nil {
		return err
	}
	k := weak.Make(s.pool)
	if _, loaded := identities.LoadOrStore(k, id); !loaded {
		runtime.AddCleanup(s.pool, func(k weak.Pointer[pgxpool.Pool]) { identities.Delete(k) }, k)
	}
	s.db.Store(&id)
	return nil
}

// connIdentityKey keeps a connection's database identity in its CustomData,
// for transaction locks, which have no pool to cache it in.
const connIdentityKey = "lockcore.database"

// txDatabase returns the identity of tx's database, read once per
// connection.
func txDatabase(ctx context.Context, tx pgx.Tx) (string, error) {
	cd := tx.Conn().PgConn().CustomData()
	if id, ok := cd[connIdentityKey].(string); ok {
		return id, nil
	}
	id, err := pgident.Read(ctx, tx)
	if err != nil {
		return "", err
	}
	cd[connIdentityKey] = id
	return id, nil
}
