package workers

import (
	"context"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DB runs the workloads' statements on the work pool. Each statement or
// transaction checks out a connection and puts it back at once, as the
// seed's ORM session gives its connection back on every commit, so a body
// with several commits needs the pool several times. DB counts the callers
// waiting for a connection, which pgxpool does not.
type DB struct {
	pool    *pgxpool.Pool
	waiting atomic.Int64
}

// NewDB returns a DB on pool. The pool's connections must have search_path
// set to the workloads' schema (see Setup).
func NewDB(pool *pgxpool.Pool) *DB { return &DB{pool: pool} }

// Pool returns the work pool.
func (d *DB) Pool() *pgxpool.Pool { return d.pool }

// Waiting returns how many callers wait for a work connection right now.
func (d *DB) Waiting() int64 { return d.waiting.Load() }

func (d *DB) acquire(ctx context.Context) (*pgxpool.Conn, error) {
	d.waiting.Add(1)
	c, err := d.pool.Acquire(ctx)
	d.waiting.Add(-1)
	return c, err
}

// Exec runs one statement in its own transaction.
func (d *DB) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	c, err := d.acquire(ctx)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	defer c.Release()
	return c.Exec(ctx, sql, args...)
}

// Get runs a one-row query in its own transaction and scans it into dest.
func (d *DB) Get(ctx context.Context, sql string, args []any, dest ...any) error {
	c, err := d.acquire(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	return c.QueryRow(ctx, sql, args...).Scan(dest...)
}

// Tx runs fn in a transaction on one connection and commits if fn returns
// nil.
func (d *DB) Tx(ctx context.Context, fn func(pgx.Tx) error) error {
	c, err := d.acquire(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	return pgx.BeginFunc(ctx, c, fn)
}

// Query runs a query in its own transaction and collects its rows with fn.
func Query[T any](ctx context.Context, d *DB, sql string, args []any, fn pgx.RowToFunc[T]) ([]T, error) {
	c, err := d.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Release()
	rows, err := c.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, fn)
}
