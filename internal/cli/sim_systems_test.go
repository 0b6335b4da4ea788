package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/locktop/locktop/internal/testenv/redistest"
	"github.com/locktop/locktop/workers"
)

func TestSimSystemsUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"sim", "--headless", "--lease-store", "etcd"}, "--lease-store"},
		{[]string{"sim", "--headless", "--lease-path", "x.db"}, "--lease-store sqlite"},
		{[]string{"sim", "--headless", "--conversations", "-1"}, "--conversations"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(tc.args, &stdout, &stderr); code != exitUsage || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, stderr.String(), exitUsage, tc.want)
		}
	}
	// A Redis that cannot be reached makes acf unusable: exit 2, one line.
	var stdout, stderr bytes.Buffer
	code := run(simArgs(t, "--scenario", "acf", "--redis", "unix:///nonexistent-locktop/redis.sock"), &stdout, &stderr)
	if code != exitUsage || strings.Count(strings.TrimSpace(stderr.String()), "\n") != 0 {
		t.Errorf("unreachable Redis: exit %d, stderr %q", code, stderr.String())
	}
}

// systemsReport is the part of the JSON report seeds 002 and 004 add.
type systemsReport struct {
	OK         bool                        `json:"ok"`
	Workers    map[string]map[string]int64 `json:"workers"`
	Turns      map[string]int64            `json:"turns"`
	Jobs       map[string]any              `json:"jobs"`
	LeaseStore string                      `json:"lease_store"`
	Invariants []struct {
		Name       string `json:"name"`
		Violations int64  `json:"violations"`
	} `json:"invariants"`
}

func readSystemsReport(t *testing.T, path string) systemsReport {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r systemsReport
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// acf and fole headless, locks on: exit 0, the report has the new workers,
// invariants and stats.
func TestSimHeadlessTurnsAndJobs(t *testing.T) {
	dir := t.TempDir()
	redisURL := redistest.Private(t).URL()
	for _, tc := range []struct {
		args       []string
		kind, inv  string
		turns, job bool
	}{
		{[]string{"--scenario", "acf", "--redis", redisURL}, "turn", string(workers.InvAnsweredOnce), true, false},
		{[]string{"--scenario", "fole", "--lease-store", "sqlite", "--lease-path", filepath.Join(dir, "leases.db")}, "map_writer", string(workers.InvTileSet), false, true},
	} {
		path := filepath.Join(dir, tc.kind+".json")
		var stdout, stderr bytes.Buffer
		if code := run(simArgs(t, append(tc.args, "--json", path)...), &stdout, &stderr); code != exitOK {
			t.Fatalf("%v: exit %d; stderr %q; stdout:\n%s", tc.args, code, stderr.String(), stdout.String())
		}
		r := readSystemsReport(t, path)
		if !r.OK || r.Workers[tc.kind]["acquired"] == 0 || (r.Turns != nil) != tc.turns || (r.Jobs != nil) != tc.job {
			t.Errorf("%v: report ok %v, workers %v, turns %v, jobs %v", tc.args, r.OK, r.Workers, r.Turns, r.Jobs)
		}
		if _, ok := r.Workers["hook"]; ok {
			t.Errorf("%v: seed 001's hook counters in the report", tc.args)
		}
		found := false
		for _, inv := range r.Invariants {
			found = found || inv.Name == tc.inv
		}
		if !found {
			t.Errorf("%v: no invariant %s in %v", tc.args, tc.inv, r.Invariants)
		}
	}
}

// acf --no-locks: two turns on the one conversation read the same state
// (the first waits, after its read, until a second has read), both commit,
// and the exit code is 1.
func TestSimTurnsNoLocksExitsOne(t *testing.T) {
	second := make(chan struct{})
	var n sync.Mutex
	count := 0
	simHooks = &workers.Hooks{At: func(ctx context.Context, p workers.Point, _ int32) {
		if p != workers.PointTurnRead {
			return
		}
		n.Lock()
		count++
		c := count
		n.Unlock()
		switch c {
		case 1:
			select {
			case <-second:
			case <-ctx.Done():
			}
		case 2:
			close(second)
		}
	}}
	t.Cleanup(func() { simHooks = nil })
	path := filepath.Join(t.TempDir(), "acf.json")
	var stdout, stderr bytes.Buffer
	code := run(simArgs(t, "--scenario", "acf", "--no-locks", "--conversations", "1", "--redis", redistest.Private(t).URL(), "--json", path), &stdout, &stderr)
	if code != exitFailure {
		t.Fatalf("exit %d, want %d; stderr %q", code, exitFailure, stderr.String())
	}
	r := readSystemsReport(t, path)
	for _, inv := range r.Invariants {
		if inv.Name == string(workers.InvTurnSequence) && inv.Violations == 0 {
			t.Errorf("the collision was not caught: %v", r.Invariants)
		}
	}
}
