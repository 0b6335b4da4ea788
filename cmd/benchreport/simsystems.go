package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/locktop/locktop/internal/testenv/redisserver"
)

// systemsReport is the part of locktop sim's JSON report for seeds 002
// and 004 that this reads.
type systemsReport struct {
	simReport
	Conversations int `json:"conversations"`
	Resources     int `json:"resources"`
	Turns         *struct {
		Committed    int64 `json:"committed"`
		StaleRefused int64 `json:"stale_refused"`
		Crashed      int64 `json:"crashed"`
	} `json:"turns"`
	Jobs *struct {
		Jobs       int64 `json:"jobs"`
		TileSets   int64 `json:"tile_sets"`
		Recoveries int64 `json:"recoveries"`
		Waits      []struct {
			Project   string  `json:"project"`
			MaxWaitMS float64 `json:"max_wait_ms"`
		} `json:"project_waits"`
	} `json:"jobs"`
}

// simSystems is the scale figure's runs of the other two lock systems,
// half the simulator's duration each: scenario acf (seed 002's turns, 1,000
// conversations, 200 message goroutines back to back, on a throw-away
// Redis of its own) and scenario fole (seed 004's jobs on leases in the
// same PostgreSQL). Budget: no invariant broken.
func simSystems(ctx context.Context, r *runner, dur time.Duration) ([]figure, error) {
	if dur <= 0 {
		return nil, nil
	}
	dur = (dur / 2).Round(time.Second)
	rs, err := redisserver.Start(ctx, redisserver.Options{})
	if err != nil {
		return nil, err
	}
	defer rs.Stop()
	var figs []figure
	for _, run := range []struct {
		scenario string
		args     []string
	}{
		{"acf", []string{"--conversations", "1000", "--goroutines", "200", "--hook-rate", "-1", "--redis", rs.URL()}},
		{"fole", nil},
	} {
		out := filepath.Join(r.bin, run.scenario+".json")
		args := append([]string{"sim", "--headless", "--scenario", run.scenario}, run.args...)
		args = append(args, "--duration", dur.String(), "--json", out, "--dsn", r.dsn, "--reset")
		c := r.cmd(ctx, filepath.Join(r.root, "bin", "locktop"), args...)
		c.Stdout = r.log
		if err := c.Run(); err != nil {
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 { // 1: an invariant broke, reported below
				return nil, fmt.Errorf("locktop sim --scenario %s: %w", run.scenario, err)
			}
		}
		b, err := os.ReadFile(out)
		if err != nil {
			return nil, err
		}
		var rep systemsReport
		if err := json.Unmarshal(b, &rep); err != nil {
			return nil, fmt.Errorf("reading %s: %w", out, err)
		}
		var broken int64
		for _, inv := range rep.Invariants {
			broken += inv.Violations
		}
		cmdline := "locktop " + strings.Join(args[:len(args)-5], " ") + " --json " + run.scenario + ".json --dsn DSN --reset"
		cmdline = strings.ReplaceAll(cmdline, rs.URL(), "REDIS_URL")
		f := figure{Baseline: "—", Ratio: "—", Budget: "no invariant broken", Verdict: verdict(rep.OK && broken == 0), Command: cmdline}
		common := fmt.Sprintf("lock wait p50 %.0f ms, p99 %.0f ms; peak RSS %.0f MB; %d violations",
			rep.WaitMS.P50, rep.WaitMS.P99, float64(rep.PeakRSS)/(1<<20), broken)
		switch {
		case rep.Turns != nil:
			f.Name = fmt.Sprintf("  scenario acf: turns under the Redis mutex (%d conversations, %d goroutines, %.0f s)", rep.Conversations, rep.Goroutines, rep.Duration)
			f.Figure = fmt.Sprintf("%.0f turns/s; %d stale commits refused by the fence, %d turns cut off by pod crashes; %s",
				float64(rep.Turns.Committed)/max(rep.Duration, 1), rep.Turns.StaleRefused, rep.Turns.Crashed, common)
		case rep.Jobs != nil:
			var small float64
			for _, w := range rep.Jobs.Waits {
				if w.Project != "p1" {
					small = max(small, w.MaxWaitMS)
				}
			}
			f.Name = fmt.Sprintf("  scenario fole: jobs under lease locks (%d resources, %d goroutines, %.0f s)", rep.Resources, rep.Goroutines, rep.Duration)
			f.Figure = fmt.Sprintf("%.0f sections/s, %d jobs, %d tile sets; %d stale grants recovered; small projects' longest slot wait %.0f ms; %s",
				rep.SectionsPS, rep.Jobs.Jobs, rep.Jobs.TileSets, rep.Jobs.Recoveries, small, common)
		default:
			return nil, fmt.Errorf("%s: the report has neither turns nor jobs", out)
		}
		figs = append(figs, f)
	}
	return figs, nil
}
