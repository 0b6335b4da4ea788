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

	"github.com/jackc/pgx/v5"
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

// querier runs a query: a connection, or a transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// readIdentity reads the identity of conn's database through q (conn
// itself, or a transaction on it). A role that may not read
// pg_control_system gets conn's host and port for the cluster instead; the
// privilege is asked first, since a failed statement would end q's
// transaction.
func readIdentity(ctx context.Context, q querier, conn *pgx.Conn) (string, error) {
	var sysOK bool
	var oid int64
	err := q.QueryRow(ctx, `SELECT has_function_privilege('pg_catalog.pg_control_system()', 'EXECUTE'), oid::int8
		FROM pg_database WHERE datname = current_database()`).Scan(&sysOK, &oid)
	if err != nil {
		return "", err
	}
	cluster := conn.Config().Host + ":" + strconv.Itoa(int(conn.Config().Port))
	if sysOK {
		if err := q.QueryRow(ctx, "SELECT system_identifier::text FROM pg_control_system()").Scan(&cluster); err != nil {
			return "", err
		}
	}
	return fmt.Sprintf("%s/%d", cluster, oid), nil
}

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
		var sys string
		var oid int64
		err := conn.QueryRow(qctx, `SELECT (SELECT system_identifier FROM pg_control_system())::text,
			(SELECT oid FROM pg_database WHERE datname = current_database())::int8`).Scan(&sys, &oid)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42501" { // insufficient_privilege: the slow way
			id, err = readIdentity(qctx, conn, conn.Conn())
			return err
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
	id, err := readIdentity(ctx, tx, tx.Conn())
	if err != nil {
		return "", err
	}
	cd[connIdentityKey] = id
	return id, nil
}
