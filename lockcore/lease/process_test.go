package lease

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/internal/testenv/pgtest"
)

// helperEnv carries a helperWhere (JSON) to the test binary re-executed as
// a second process.
const helperEnv = "LOCKTOP_LEASE_HELPER"

// helperWhere says where the shared tables are and what to do.
type helperWhere struct {
	Store  string // "postgres" or "sqlite"
	DSN    string
	Schema string
	Path   string
	Dir    string // the shared directory of the critical-section checks
	Rounds int
	Owner  string
	// Task is what the helper does: "" the shared work (work), "job-hold"
	// start job JobID, take Resource with its context, say "held" on
	// stdout and wait to be killed (holdForJob).
	Task     string
	JobID    string
	Resource string
	Lease    time.Duration
}

// helperMain is the second process: it does its share of the work and
// exits 0 if it saw no overlap.
func helperMain() int {
	var w helperWhere
	if err := json.Unmarshal([]byte(os.Getenv(helperEnv)), &w); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 2
	}
	run := work
	switch w.Task {
	case "job-hold":
		run = holdForJob
	case "hold":
		run = holdPlain
	}
	if err := run(w); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	return 0
}

// holdPlain takes w.Resource for writing (no job), says "held" and then
// holds it until the process is killed.
func holdPlain(w helperWhere) error {
	ctx := context.Background()
	m, _, err := openWhere(ctx, w, Options{Owner: w.Owner, Lease: w.Lease})
	if err != nil {
		return err
	}
	r, err := ParseResource(w.Resource)
	if err != nil {
		return err
	}
	if _, err := m.Acquire(ctx, r, Write); err != nil {
		return err
	}
	fmt.Println("held")
	select {}
}

// holdForJob starts job w.JobID, takes w.Resource for writing with the
// job's context, says "held" and then holds both until the process is
// killed.
func holdForJob(w helperWhere) error {
	ctx := context.Background()
	m, _, err := openWhere(ctx, w, Options{Owner: w.Owner, Lease: w.Lease})
	if err != nil {
		return err
	}
	slot, err := m.StartJob(ctx, Job{ID: w.JobID, Project: "p"})
	if err != nil {
		return err
	}
	r, err := ParseResource(w.Resource)
	if err != nil {
		return err
	}
	if _, err := m.Acquire(slot.Context(), r, Write); err != nil {
		return err
	}
	fmt.Println("held")
	select {}
}

// startHelper starts the test binary as a helper process doing w, and
// returns it once it has said "held" on stdout. It is killed (SIGKILL)
// when the test ends, if it has not been already.
func startHelper(t *testing.T, w helperWhere) *exec.Cmd {
	t.Helper()
	cmd := helperCmd(t, w)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	said := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		said <- sc.Scan() && sc.Text() == "held"
		io.Copy(io.Discard, out)
	}()
	select {
	case ok := <-said:
		if !ok {
			t.Fatal("the helper process ended without holding")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the helper process did not hold within 30s")
	}
	return cmd
}

// helperCmd returns the test binary as a helper process doing w, not
// started. It is killed (SIGKILL) when the test ends, if it still runs.
func helperCmd(t *testing.T, w helperWhere) *exec.Cmd {
	t.Helper()
	spec, _ := json.Marshal(w)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+string(spec))
	cmd.Stderr = os.Stderr
	t.Cleanup(func() {
		if cmd.Process != nil && cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return cmd
}

// openWhere opens a Manager on the tables w names.
func openWhere(ctx context.Context, w helperWhere, o Options) (*Manager, func(), error) {
	o = testOptions(o)
	if w.Store == "sqlite" {
		m, err := OpenSQLite(ctx, w.Path, o)
		return m, func() {}, err
	}
	pool, err := pgxpool.New(ctx, w.DSN)
	if err != nil {
		return nil, nil, err
	}
	o.Schema = w.Schema
	m, err := OpenPostgres(ctx, pool, o)
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return m, pool.Close, nil
}

// work is one process's share: write sections on one resource, each
// appending its fence to a shared file, and jobs under a global cap of
// one; every section checks that no one else is inside.
func work(w helperWhere) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	m, done, err := openWhere(ctx, w, Options{Owner: w.Owner, MaxGlobalJobs: 1, Wait: 30 * time.Second})
	if err != nil {
		return err
	}
	defer done()
	defer m.Close()
	inside := func(name string, body func() error) error {
		marker := filepath.Join(w.Dir, name+".inside")
		f, err := os.OpenFile(marker, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			return fmt.Errorf("%s: someone else is inside: %w", name, err)
		}
		f.Close()
		time.Sleep(time.Millisecond) // room for another to come in, were the lock broken
		berr := body()
		if err := os.Remove(marker); err != nil {
			return err
		}
		return berr
	}
	for i := range w.Rounds {
		l, err := m.Acquire(ctx, Map("shared"), Write)
		if err != nil {
			return err
		}
		err = inside("lock", func() error {
			f, err := os.OpenFile(filepath.Join(w.Dir, "fences"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = fmt.Fprintf(f, "%d %s\n", l.Fence(), w.Owner)
			return err
		})
		if rerr := l.Release(ctx); err == nil {
			err = rerr
		}
		if err != nil {
			return err
		}
		if i%3 == 0 {
			s, err := m.StartJob(ctx, Job{ID: fmt.Sprintf("%s-%d", w.Owner, i), Project: w.Owner})
			if err != nil {
				return err
			}
			err = inside("job", func() error { return nil })
			if derr := s.Finish(ctx); err == nil {
				err = derr
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

func testTwoProcesses(t *testing.T, e *env) {
	w := e.where
	w.Dir, w.Rounds = t.TempDir(), 25
	child := w
	child.Owner = "child"
	spec, _ := json.Marshal(child)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+string(spec))
	out := make(chan error, 1)
	var output []byte
	go func() {
		var err error
		output, err = cmd.CombinedOutput()
		out <- err
	}()
	w.Owner = "parent"
	if err := work(w); err != nil {
		t.Errorf("parent: %v", err)
	}
	if err := <-out; err != nil {
		var ee *exec.ExitError
		errors.As(err, &ee)
		t.Fatalf("child: %v\n%s", err, output)
	}
	f, err := os.Open(filepath.Join(w.Dir, "fences"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var last int64
	owners := map[string]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fence, owner, _ := strings.Cut(sc.Text(), " ")
		n, _ := strconv.ParseInt(fence, 10, 64)
		if n <= last {
			t.Errorf("fence %d after %d: not strictly increasing across processes", n, last)
		}
		last = n
		owners[owner]++
	}
	if owners["parent"] != w.Rounds || owners["child"] != w.Rounds {
		t.Errorf("sections per process: %v", owners)
	}
}

// Issue 31, fault 7: a job's process killed with SIGKILL while its job
// holds a lock; the job is retried under the same ID once its lease has
// passed. The retried job must not protect its dead predecessor's lock
// from recovery: its own acquire takes the lock over.
func testJobIDReused(t *testing.T, e *env) {
	r := Map("reused")
	w := e.where
	w.Task, w.Owner, w.JobID, w.Resource, w.Lease = "job-hold", "doomed", "tiles-1", r.String(), time.Second
	cmd := startHelper(t, w)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	m := e.open(Options{Owner: "retry", Grace: 100 * time.Millisecond, Wait: 5 * time.Second})
	var slot *JobSlot
	pgtest.Eventually(t, "the job's ID is free again (its lease passed)", func() bool {
		var err error
		slot, err = m.StartJob(ctxT(t), Job{ID: "tiles-1", Project: "p"})
		if err != nil && !errors.Is(err, ErrJobExists) {
			t.Fatal(err)
		}
		return err == nil
	})
	defer slot.Finish(context.Background())
	aged(t, m, r, true, 100*time.Millisecond) // the dead job's lock: lapsed, no heartbeat
	l, err := m.Acquire(slot.Context(), r, Write)
	if err != nil {
		t.Fatalf("the retried job's acquire of its dead predecessor's lock: %v", err)
	}
	defer l.Release(context.Background())
	if recs, _ := m.Audit(ctxT(t)); len(recs) != 1 || recs[0].VictimOwner != "job:tiles-1" || recs[0].Actor != "job:tiles-1" {
		t.Errorf("audit: %+v", recs)
	}
}

// A holder's process killed with SIGKILL while it holds a lock: the lock
// is recoverable once its lease and Grace have passed, the recovery is
// audited with the dead holder as victim, and the next holder's fence is
// higher than the dead holder's.
func testHolderKilled(t *testing.T, e *env) {
	r := Map("killed")
	w := e.where
	w.Task, w.Owner, w.Resource, w.Lease = "hold", "doomed", r.String(), time.Second
	cmd := startHelper(t, w)
	m := e.open(Options{Owner: "next", Grace: 100 * time.Millisecond, Wait: 10 * time.Second})
	locks, err := m.Locks(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	var dead int64
	for _, i := range locks {
		if i.Granted && i.Resource == r && i.Owner == "doomed" {
			dead = i.Fence
		}
	}
	if dead == 0 {
		t.Fatalf("the helper's grant is not listed: %+v", locks)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	killed := time.Now()
	l, err := m.Acquire(ctxT(t), r, Write)
	if err != nil {
		t.Fatalf("acquire after the holder was killed: %v", err)
	}
	defer l.Release(context.Background())
	if took := time.Since(killed); took > 8*time.Second {
		t.Errorf("recovery took %s, lease 1s", took)
	}
	if l.Fence() <= dead {
		t.Errorf("next holder's fence %d, not above the killed holder's %d", l.Fence(), dead)
	}
	recs, err := m.Audit(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, a := range recs {
		if a.VictimOwner == "doomed" {
			found = true
		}
	}
	if !found {
		t.Errorf("no audit record names the killed holder: %+v", recs)
	}
}
