//go:build attack

package lockcore_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/lockcore/registry"
)

// The child process of the kill test: the test binary run again with
// BP16_CHILD set, before TestMain starts a server. It takes one agent key
// in the database BP16_DSN names, says so, and blocks until SIGKILLed.
func init() {
	if os.Getenv("BP16_CHILD") == "" {
		return
	}
	id, _ := strconv.Atoi(os.Getenv("BP16_ID"))
	pool, err := pgxpool.New(context.Background(), os.Getenv("BP16_DSN"))
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	if _, err := lockcore.New(pool).Acquire(context.Background(), lockcore.Pair(registry.SpaceAgent, int32(id))); err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	fmt.Println("held")
	select {}
}

func startHolder(t *testing.T, dsn string, id int32) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "BP16_CHILD=hold", "BP16_DSN="+dsn, "BP16_ID="+strconv.Itoa(int(id)))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "held\n" {
		t.Fatalf("child: %q, %v", line, err)
	}
	return cmd
}

// TestAttackBp16KilledHolderTwoDatabases: one key held by two processes in
// two databases (advisory locks are per database), a waiter queued in each.
// SIGKILL of the first database's holder grants that database's waiter; the
// second database's waiter still waits behind its live holder, and is
// granted only once that holder is killed too.
func TestAttackBp16KilledHolderTwoDatabases(t *testing.T) {
	ctx := context.Background()
	id := 1000 + nextID.Add(1)
	key := lockcore.Pair(registry.SpaceAgent, id)
	dsnA := pgtest.DSN(t)
	dsnB := pgtest.Database(t, "bp16_other")
	holdA := startHolder(t, dsnA, id)
	holdB := startHolder(t, dsnB, id)
	svcA, _ := newService(t, 4)
	poolB, err := pgxpool.New(ctx, dsnB)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(poolB.Close)
	svcB := lockcore.New(poolB)
	wait := func(s *lockcore.Service) chan error {
		ch := make(chan error, 1)
		go func() {
			l, err := s.Acquire(ctx, key)
			if err == nil {
				defer l.Release(ctx)
			}
			ch <- err
		}()
		return ch
	}
	gotA, gotB := wait(svcA), wait(svcB)
	qA := pgtest.Conn(t)
	qB, err := pgx.Connect(ctx, dsnB)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { qB.Close(context.Background()) })
	queued := func(q *pgx.Conn) bool {
		g, w := countGranted(rowsFor(t, q, key))
		return g == 1 && w == 1
	}
	pgtest.Eventually(t, "a holder and a waiter in each database", func() bool { return queued(qA) && queued(qB) })
	holdA.Process.Kill()
	holdA.Wait()
	select {
	case err := <-gotA:
		if err != nil {
			t.Fatalf("database A's waiter after its holder was killed: %v", err)
		}
	case <-time.After(25 * time.Second):
		t.Fatal("database A's waiter still waits 25s after its holder was killed")
	}
	select {
	case err := <-gotB:
		t.Fatalf("database B's waiter returned (%v) while B's holder lives", err)
	default:
	}
	if !queued(qB) {
		t.Fatal("database B's holder or waiter was disturbed by the kill in database A")
	}
	holdB.Process.Kill()
	holdB.Wait()
	select {
	case err := <-gotB:
		if err != nil {
			t.Fatalf("database B's waiter after its holder was killed: %v", err)
		}
	case <-time.After(25 * time.Second):
		t.Fatal("database B's waiter still waits 25s after its holder was killed")
	}
}
