package lockcore

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"time"
	"weak"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A database's identity is what the server says it is: the cluster's
// system identifier (pg_control_system, the same on a physical standby)
// and the database's oid. Reentrancy and Service.FenceOf judge "the same
// database" by it, as the locks themselves do, so two pools that spell
// one database differently (another host name, a trailing slash, another
// user) are one database.

// identities caches each pool's database identity: read once per pool, and
// shared by every Service on that pool. Entries go when their pool does.
var identities sync.Map // weak.Pointer[pgxpool.Pool] -> string

// identityQuery reads the identity in one statement.
const identityQuery = `SELECT (SELECT system_identifier FROM pg_control_system())::text,
	(SELECT oid FROM pg_database WHERE datname = current_database())::int8`

// fallbackQuery reads the database's oid alone, for a server that does not
// let the role read pg_control_system: the cluster is then named by the
// pool's host and port.
const fallbackQuery = `SELECT oid::int8 FROM pg_database WHERE datname = current_database()`

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
// (unless another Service on the same pool has), in one round trip once per
// pool.
func (s *Service) identify(ctx context.Context, conn *pgxpool.Conn, deadline time.Time) error {
	if s.database() != "" {
		return nil
	}
	var id string
	err := s.query(ctx, conn, deadline, func(qctx context.Context) error {
		var sys string
		var oid int64
		err := conn.QueryRow(qctx, identityQuery).Scan(&sys, &oid)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42501" { // insufficient_privilege
			err = conn.QueryRow(qctx, fallbackQuery).Scan(&oid)
			cc := s.pool.Config().ConnConfig
			sys = cc.Host + ":" + strconv.Itoa(int(cc.Port))
		}
		id = fmt.Sprintf("%s/%d", sys, oid)
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
