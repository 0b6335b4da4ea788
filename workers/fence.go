package workers

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ErrFenced means a write of a critical section was refused (or the
// section refused entry) because a newer grant of the section's lock has
// entered a section of the agent since: the section's lock was lost and
// its holder ran on. It is how the storage side of fencing says no
// (Kleppmann, "How to do distributed locking").
var ErrFenced = errors.New("write refused: a newer holder of the lock has entered (stale fence)")

// Fencing: each section records its lock's fence on entry (enter_section
// raises agents.fence, only upward), and each write of a fenced section
// runs in one transaction with check_fence first. check_fence takes the
// agent's row FOR SHARE, so a concurrent fence raise waits for the write's
// commit, and a write that comes after a raise finds a newer fence and is
// refused. A section with fence 0 (locks off, or lockcore not fencing)
// writes unfenced, as before.

// write runs one writing statement of the section of agent that ctx is in,
// in its own transaction, scanning its row into dest (none: the statement
// returns no row). In a fenced section the write is refused with an error
// wrapping ErrFenced once a newer fence has entered, and counted either way.
func (e *Env) write(ctx context.Context, agent int32, sql string, args []any, dest ...any) error {
	sec := sectionIn(ctx, agent)
	if sec == nil || sec.fence == 0 {
		if len(dest) == 0 {
			_, err := e.DB.Exec(ctx, sql, args...)
			return err
		}
		return e.DB.Get(ctx, sql, args, dest...)
	}
	c, err := e.DB.acquire(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	// One round trip, one implicit transaction: the check's row lock holds
	// until the write commits.
	b := &pgx.Batch{}
	b.Queue("SELECT check_fence($1, $2)", agent, sec.fence)
	b.Queue(sql, args...)
	br := c.SendBatch(ctx, b)
	_, cerr := br.Exec()
	if len(dest) == 0 {
		_, err = br.Exec()
	} else {
		err = br.QueryRow().Scan(dest...)
	}
	err = errors.Join(cerr, err, br.Close())
	return sec.counted(agent, cerr, err)
}

// writeTx runs fn in one transaction of the section of agent that ctx is
// in; in a fenced section the fence is checked first, and its row lock
// holds until the commit.
func (e *Env) writeTx(ctx context.Context, agent int32, fn func(pgx.Tx) error) error {
	sec := sectionIn(ctx, agent)
	if sec == nil || sec.fence == 0 {
		return e.DB.Tx(ctx, fn)
	}
	var cerr error
	err := e.DB.Tx(ctx, func(tx pgx.Tx) error {
		if _, cerr = tx.Exec(ctx, "SELECT check_fence($1, $2)", agent, sec.fence); cerr != nil {
			return cerr
		}
		return fn(tx)
	})
	return sec.counted(agent, cerr, err)
}

// counted counts a fenced write by its outcome and turns a refusal by the
// fence check (checkErr) into ErrFenced; err is the write's whole error.
func (s *section) counted(agent int32, checkErr, err error) error {
	var pgErr *pgconn.PgError
	switch {
	case errors.As(checkErr, &pgErr) && pgErr.Code == fenceCode:
		s.refused.Add(1)
		return fmt.Errorf("%w: AGENT %d, fence %d", ErrFenced, agent, s.fence)
	case err == nil:
		s.writes.Add(1)
	}
	return err
}
