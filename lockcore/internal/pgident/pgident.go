// Package pgident names a PostgreSQL database by what the server says it
// is: the cluster's system identifier (pg_control_system, the same on a
// physical standby) and the database's oid, "SYSID/OID". Two pools that
// spell one database differently (another host name, a trailing slash,
// another user) get one name. The lock family knows a lock's store by it
// (lockcore.Entry.Store): advisory locks by the database. (Lease tables
// carry a name of their own, lease's dal_store.)
package pgident

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Querier runs a query: a connection, or a transaction.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Read names the database q is connected to (a connection, or a transaction
// on one). A role that may not read pg_control_system gets, for the cluster,
// what any role may read and no spelling of the DSN changes: the time the
// server started and the port it serves (a restart then renames it). The
// privilege is asked first, since a failed statement would end q's
// transaction.
func Read(ctx context.Context, q Querier) (string, error) {
	var sysOK bool
	var oid int64
	var started, port string
	err := q.QueryRow(ctx, `SELECT has_function_privilege('pg_catalog.pg_control_system()', 'EXECUTE'), oid::int8,
		(extract(epoch FROM pg_postmaster_start_time()) * 1e6)::int8::text, current_setting('port')
		FROM pg_database WHERE datname = current_database()`).Scan(&sysOK, &oid, &started, &port)
	if err != nil {
		return "", err
	}
	cluster := "started:" + started + ":" + port
	if sysOK {
		if err := q.QueryRow(ctx, "SELECT system_identifier::text FROM pg_control_system()").Scan(&cluster); err != nil {
			return "", err
		}
	}
	return fmt.Sprintf("%s/%d", cluster, oid), nil
}

// Fast names conn's database in one statement when the role may read
// pg_control_system, else as Read does. conn must not be in a transaction.
func Fast(ctx context.Context, conn *pgx.Conn) (string, error) {
	var sys string
	var oid int64
	err := conn.QueryRow(ctx, `SELECT (SELECT system_identifier FROM pg_control_system())::text,
		(SELECT oid FROM pg_database WHERE datname = current_database())::int8`).Scan(&sys, &oid)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42501" { // insufficient_privilege: the slow way
		return Read(ctx, conn)
	}
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s/%d", sys, oid), nil
}
