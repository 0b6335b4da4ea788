package lease

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
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
}

// helperMain is the second process: it does its share of the work and
// exits 0 if it saw no overlap.
func helperMain() int {
	var w helperWhere
	if err := json.Unmarshal([]byte(os.Getenv(helperEnv)), &w); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 2
	}
	if err := work(w); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	return 0
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
			if derr := s.Done(ctx); err == nil {
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
