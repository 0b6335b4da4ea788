package lockcore_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/lockcore"
)

// databaseURL is the database the examples run against: in `make test`,
// the tests' throw-away one.
func databaseURL() string { return pgtest.DSNForExamples() }

// A critical section under a blocking lock: With waits for the key (up to
// the Service's timeout), runs the body, and releases, also when the body
// fails or panics.
func ExampleService_With() {
	ctx := context.Background()
	// The lock connections come from a pool of their own, apart from the
	// pool the body does its work on.
	pool, err := pgxpool.New(ctx, databaseURL())
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	locks := lockcore.New(pool)

	key := lockcore.Pair(1, 7) // pg_advisory_lock(1, 7)
	err = locks.With(ctx, key, func(ctx context.Context) error {
		// Commit on other connections as often as needed: the lock is
		// held on its own session until the body returns. ctx is cancelled,
		// with cause ErrLost, if the lock is lost meanwhile.
		fence, _ := lockcore.FenceOf(ctx, key)
		fmt.Println("holding", key, "with a fence:", fence > 0)
		return nil
	})
	switch {
	case errors.Is(err, lockcore.ErrTimeout):
		fmt.Println("another session held it too long")
	case errors.Is(err, lockcore.ErrReentrant):
		fmt.Println("this context already holds it")
	case err != nil:
		log.Fatal(err)
	}
	// Output: holding AGENT 7 with a fence: true
}

// A background job that skips a key held elsewhere, and does it later.
func ExampleService_TryWith() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, databaseURL())
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	locks := lockcore.New(pool)
	key := lockcore.Pair(1, 8)

	reap := func(ctx context.Context) error {
		fmt.Println("reaped", key)
		return nil
	}
	hook, err := locks.Acquire(ctx, key) // someone else is busy with the key
	if err != nil {
		log.Fatal(err)
	}
	ok, err := locks.TryWith(ctx, key, reap)
	fmt.Println("while held elsewhere:", ok, err)
	if err := hook.Release(ctx); err != nil {
		log.Fatal(err)
	}
	ok, err = locks.TryWith(ctx, key, reap)
	fmt.Println("once free:", ok, err)
	// Output:
	// while held elsewhere: false <nil>
	// reaped AGENT 8
	// once free: true <nil>
}

// A hold that spans several steps: Acquire, work fenced by the lock's
// token, Release. The storage accepts a write only with a fence at least
// as high as the last one it saw, so a holder that lost its lock to a later
// grant cannot overwrite that grant's work.
func ExampleService_Acquire() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, databaseURL())
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	locks := lockcore.New(pool)
	work, err := pgx.Connect(ctx, databaseURL())
	if err != nil {
		log.Fatal(err)
	}
	defer work.Close(ctx)
	if _, err := work.Exec(ctx, `CREATE TEMP TABLE balance (id int PRIMARY KEY, amount int, fence bigint);
		INSERT INTO balance VALUES (1, 100, 0)`); err != nil {
		log.Fatal(err)
	}

	l, err := locks.Acquire(ctx, lockcore.HashKey("tenant-1:balance"), lockcore.Wait(5*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer l.Release(ctx)
	tag, err := work.Exec(ctx, `UPDATE balance SET amount = amount - 30, fence = $1
		WHERE id = 1 AND fence <= $1`, l.Fence())
	if err != nil {
		log.Fatal(err)
	}
	select {
	case <-l.Done():
		fmt.Println("lost the lock:", context.Cause(l.Context()))
	default:
		fmt.Println("fenced write applied:", tag.RowsAffected() == 1)
	}
	if err := l.Release(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("after Release:", l.Err())
	// Output:
	// fenced write applied: true
	// after Release: lock released
}

// A lock is lost when its session ends: here another session terminates
// the holder's backend. The holder learns at once, not at Release: Done
// closes and the lock's context is cancelled with cause ErrLost.
func ExampleLock_Done() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, databaseURL())
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	locks := lockcore.New(pool)
	l, err := locks.Acquire(ctx, lockcore.Pair(1, 9))
	if err != nil {
		log.Fatal(err)
	}

	admin, err := pgx.Connect(ctx, databaseURL())
	if err != nil {
		log.Fatal(err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "SELECT pg_terminate_backend($1)", int32(l.PID())); err != nil {
		log.Fatal(err)
	}

	<-l.Done()
	fmt.Println("lost:", errors.Is(context.Cause(l.Context()), lockcore.ErrLost))
	fmt.Println("Release:", errors.Is(l.Release(ctx), lockcore.ErrLost))
	// Output:
	// lost: true
	// Release: true
}

// A transaction-scoped lock: held until the transaction ends.
func ExampleXactLock() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, databaseURL())
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	key := lockcore.HashKey("tenant-1:2025-01-15")
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := lockcore.XactLock(ctx, tx, key); err != nil {
			return err
		}
		fmt.Println("holding", key, "until commit")
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output: holding 761239885 until commit
}

// String keys hash to one-bigint keys exactly as the TypeScript service
// this project inherited its keys from does.
func ExampleHashKey() {
	k := lockcore.HashKey("tenant-1:2025-01-15")
	fmt.Println(k.Int64(), k.IsPair())
	fmt.Println(lockcore.KeyFromString(9, "a"))
	// Output:
	// 761239885 false
	// 9 -468965076
}
