package lockcore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// XactLock takes key for the rest of tx: pg_advisory_xact_lock. It is
// released when tx commits or rolls back. It waits as long as the
// transaction's statement_timeout and lock_timeout allow, or until ctx ends;
// a lock_timeout that fires is ErrTimeout. A key that ctx holds already (a
// session lock of a Service, in tx's database) is refused at once with
// ErrReentrant, since the wait would be for the caller itself; finding tx's
// database then costs a query, once per connection. It needs no fence and
// no watch: if the session ends, the transaction fails with it, and so does
// its commit.
func XactLock(ctx context.Context, tx pgx.Tx, key Key) error {
	if held(ctx, "", key) != nil { // held somewhere: in tx's database?
		db, err := txDatabase(ctx, tx)
		if err != nil {
			return &AdvisoryLockError{Key: key, Op: OpXact, Err: err}
		}
		if held(ctx, db, key) != nil {
			return &AdvisoryLockError{Key: key, Op: OpXact, Err: ErrReentrant}
		}
	}
	if _, err := tx.Exec(ctx, plainSQL(key).xact, keyArgs(key)...); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "55P03" { // lock_not_available
			err = fmt.Errorf("%w: %w", ErrTimeout, err)
		}
		return &AdvisoryLockError{Key: key, Op: OpXact, Err: err}
	}
	return nil
}

// TryXactLock takes key for the rest of tx if no one else holds it:
// pg_try_advisory_xact_lock.
func TryXactLock(ctx context.Context, tx pgx.Tx, key Key) (bool, error) {
	var ok bool
	if err := tx.QueryRow(ctx, plainSQL(key).tryXact, keyArgs(key)...).Scan(&ok); err != nil {
		return false, &AdvisoryLockError{Key: key, Op: OpTryXact, Err: err}
	}
	return ok, nil
}
