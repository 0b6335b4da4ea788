package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/ui"
	"github.com/locktop/locktop/workers"
)

var simSchemaSeq atomic.Int32

// simArgs are the arguments of a short headless run on the test database,
// in a schema of its own.
func simArgs(t *testing.T, extra ...string) []string {
	t.Helper()
	t.Setenv("TMPDIR", t.TempDir()) // the config editor's file goes there
	schema := fmt.Sprintf("cmd_sim_%d", simSchemaSeq.Add(1))
	return append([]string{"sim", "--headless", "--dsn", pgtest.DSN(t), "--schema", schema, "--duration", "1500ms"}, extra...)
}

func TestSimUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"sim"}, exitUsage, "locktop --dsn URL --sim"},
		{[]string{"sim", "--headless", "--scenario", "nonsense"}, exitUsage, "unknown scenario"},
		{[]string{"sim", "--headless", "--duration", "0s"}, exitUsage, "--duration"},
		{[]string{"sim", "--headless", "--hook-rate", "-3"}, exitUsage, "--hook-rate"},
		{[]string{"sim", "--headless", "stray"}, exitUsage, "unexpected argument"},
		{[]string{"sim", "--bogus"}, exitUsage, "bogus"},
		{[]string{"sim", "--headless", "--schema", "x; DROP TABLE y"}, exitUsage, "--schema"},
		{[]string{"sim", "--list"}, exitOK, ""},
	} {
		var stdout, stderr bytes.Buffer
		code := run(tc.args, &stdout, &stderr)
		if code != tc.code || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, stderr.String(), tc.code, tc.want)
		}
		if strings.Contains(stderr.String(), "goroutine ") {
			t.Errorf("%v: a stack trace", tc.args)
		}
	}
}

func TestSimUnusableDatabase(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run([]string{"sim", "--headless", "--duration", "1s", "--dsn", "postgres://nobody:secret@/nodb?host=/nonexistent-locktop&connect_timeout=2"}, &stdout, &stderr)
	if code != exitUsage {
		t.Errorf("exit %d, want %d; stderr %q", code, exitUsage, stderr.String())
	}
	if lines := strings.Count(strings.TrimSpace(stderr.String()), "\n"); lines != 0 || strings.Contains(stderr.String(), "secret") {
		t.Errorf("want one line without the password, got %q", stderr.String())
	}
}

// simReport is the headless JSON report, as a load test reads it.
type simReport struct {
	Scenario     *string `json:"scenario"`
	LocksEnabled *bool   `json:"locks_enabled"`
	OK           *bool   `json:"ok"`
	Invariants   []struct {
		Name       *string `json:"name"`
		Violations *int64  `json:"violations"`
	} `json:"invariants"`
	Workers map[string]map[string]int64 `json:"workers"`
	Losses  map[string]int64            `json:"losses"`
}

func readSimReport(t *testing.T, path string) simReport {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r simReport
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if r.Scenario == nil || r.LocksEnabled == nil || r.OK == nil || len(r.Invariants) == 0 || r.Workers == nil || r.Losses == nil {
		t.Fatalf("report lacks a top-level key: %s", b)
	}
	for _, inv := range r.Invariants {
		if inv.Name == nil || inv.Violations == nil {
			t.Errorf("invariant without name or violations: %s", b)
		}
	}
	for _, kind := range []string{"hook", "reaper", "reconciler", "poller", "watchdog", "deferred_stop", "summariser", "config_editor", "skill_injector"} {
		c, ok := r.Workers[kind]
		if !ok {
			t.Errorf("no workers.%s", kind)
			continue
		}
		for _, f := range []string{"attempts", "acquired", "skipped", "timeouts", "reentrant", "lost", "errors"} {
			if _, ok := c[f]; !ok {
				t.Errorf("workers.%s has no %s", kind, f)
			}
		}
	}
	return r
}

func TestSimHeadlessReport(t *testing.T) {
	path := filepath.Join(t.TempDir(), "report.json")
	var stdout, stderr bytes.Buffer
	code := run(simArgs(t, "--scenario", "steady", "--agents", "30", "--watch-deadlocks", "--json", path), &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("exit %d; stderr %q; stdout:\n%s", code, stderr.String(), stdout.String())
	}
	for _, want := range []string{"scenario steady: 30 agents, ", "WORKER", "no_overlapping_sections", "OK: no invariant broken",
		"deadlocks: none made, 0 reported over "} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, stdout.String())
		}
	}
	r := readSimReport(t, path)
	if *r.Scenario != "steady" || !*r.LocksEnabled || !*r.OK || r.Workers["hook"]["acquired"] == 0 {
		t.Errorf("report: scenario %s, locks %v, ok %v, hooks acquired %d", *r.Scenario, *r.LocksEnabled, *r.OK, r.Workers["hook"]["acquired"])
	}
}

// --no-locks: the checks catch the race and the exit code is 1. The
// interleaving is forced: the first hook on the hot agent waits, after its
// read, until a second section of that agent has entered.
func TestSimNoLocksExitsOne(t *testing.T) {
	var first atomic.Bool
	second := make(chan struct{})
	var once sync.Once
	simHooks = &workers.Hooks{At: func(ctx context.Context, p workers.Point, agent int32) {
		if agent != 1 {
			return
		}
		switch {
		case p == workers.PointApplyChecked && first.CompareAndSwap(false, true):
			select {
			case <-second:
			case <-ctx.Done():
			}
		case p == workers.PointEntered && first.Load():
			once.Do(func() { close(second) })
		}
	}}
	t.Cleanup(func() { simHooks = nil })
	path := filepath.Join(t.TempDir(), "report.json")
	var stdout, stderr bytes.Buffer
	code := run(simArgs(t, "--scenario", "hook-storm", "--no-locks", "--json", path), &stdout, &stderr)
	if code != exitFailure {
		t.Fatalf("exit %d, want %d; stderr %q", code, exitFailure, stderr.String())
	}
	r := readSimReport(t, path)
	if *r.OK || *r.LocksEnabled {
		t.Errorf("report: ok %v, locks %v", *r.OK, *r.LocksEnabled)
	}
	if !strings.Contains(stdout.String(), "BROKEN no_overlapping_sections") {
		t.Errorf("summary does not show the overlap:\n%s", stdout.String())
	}
}

// The dashboard's embedded mode starts "steady" through startEmbeddedSim.
func TestStartEmbeddedSim(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	s, pools, stop, err := startEmbeddedSim(context.Background(), pgtest.DSN(t), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	var simulator ui.Simulator = s
	if st := simulator.Status(); !st.Running || st.Scenario != "steady" || !st.LocksEnabled {
		t.Errorf("status %+v", st)
	}
	if ps := pools(); len(ps) != 2 || ps[0].Name != "lock" || ps[1].Name != "work" || ps[1].MaxConns != 25 {
		t.Errorf("pools %+v", ps)
	}
	stop()
	if r := s.Report(); !r.OK || s.Status().Running {
		t.Errorf("after stop: running %v, ok %v", s.Status().Running, r.OK)
	}
	if _, _, _, err := startEmbeddedSim(context.Background(), "postgres://nobody@/x?host=/nonexistent-locktop&connect_timeout=2", "", nil); report(err, io.Discard) != exitUsage {
		t.Errorf("unusable database: %v", err)
	}
}
