package sim

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/model"
	"github.com/locktop/locktop/workers"
)

// Report is the result of a run, as `locktop sim --headless --json` writes
// it. The top-level keys scenario, locks_enabled, ok, invariants and
// workers are a stable interface for load tests.
type Report struct {
	Scenario     string                    `json:"scenario"`
	LocksEnabled bool                      `json:"locks_enabled"`
	OK           bool                      `json:"ok"` // no invariant broken and the final checks ran
	Invariants   []model.Invariant         `json:"invariants"`
	Workers      map[string]model.Counters `json:"workers"` // each kind's "lost" counts its locks lost while held
	// Losses are the critical sections whose lock was lost while they ran,
	// by how they ended.
	Losses LossStats `json:"losses"`
	// Errors are the attempts that ended in an error, by error. More than
	// MaxErrorShare of them fail the run (OK is false).
	Errors ErrorStats `json:"errors"`
	// LockOrderInversions are the acquires that took two classes of lock in
	// the reverse of an order taken before in the run (or declared), each
	// pair once, with both acquisition sites: deadlocks waiting to happen.
	LockOrderInversions []lockcore.Inversion `json:"lock_order_inversions,omitempty"`

	SharedPool bool `json:"shared_pool"`
	Agents     int  `json:"agents"`
	// Goroutines are the goroutines of every driver at the end of the run
	// (hooks, background workers, services, faults); HookGoroutines those
	// that fire hook routes (Options.Goroutines sets them).
	Goroutines     int     `json:"goroutines"`
	HookGoroutines int     `json:"hook_goroutines"`
	DurationSec    float64 `json:"duration_s"`
	// Sections are completed critical sections; Hooks the hook sections
	// among them. The rates are per second of run time.
	Sections      int64        `json:"sections"`
	SectionsPerS  float64      `json:"sections_per_s"`
	Hooks         int64        `json:"hooks"`
	HooksPerS     float64      `json:"hooks_per_s"`
	Wait          WaitStats    `json:"wait_ms"` // lock waits of acquires that got the lock
	Pools         []PoolReport `json:"pools"`
	Phantoms      int64        `json:"phantom_unlocks"`
	EventsDropped int64        `json:"events_dropped"`
	PeakRSSBytes  int64        `json:"peak_rss_bytes,omitempty"` // the whole process's (VmHWM)
	AuditError    string       `json:"audit_error,omitempty"`    // the final checks could not all run

	// Seed 002 (scenarios with conversation turns): the conversations, and
	// what the turns did (commits, redeliveries, extends, stale commits
	// refused, crashes, outages).
	Conversations int                `json:"conversations,omitempty"`
	Turns         *workers.TurnStats `json:"turns,omitempty"`
	// Seed 004 (scenarios with jobs): the lease store, the resources
	// (projects, maps, sketches), and what the jobs did, with each
	// project's longest wait for a job slot.
	LeaseStore string            `json:"lease_store,omitempty"`
	Resources  int               `json:"resources,omitempty"`
	Jobs       *workers.JobStats `json:"jobs,omitempty"`
	// Deadlocks is what the deadlock watch saw (scenario "deadlock", or
	// Options.WatchDeadlocks): cycles made, reported, missed, late.
	Deadlocks *DeadlockStats `json:"deadlocks,omitempty"`
}

// LossStats count the critical sections whose lock was lost while they ran
// (see workers.Loss). Each ended one of three ways: aborted because the
// fence refused its write (a newer holder had entered), aborted because
// it stopped at the loss signal before writing again, or lost only after
// its writes, each of them accepted under its fence. Unfenced counts those
// that had no fence (locks without fencing): nothing refused their writes.
type LossStats struct {
	Sections      int64 `json:"sections"`       // lost critical sections
	Refused       int64 `json:"refused"`        // aborted: the fence refused a write
	Stopped       int64 `json:"stopped"`        // aborted: stopped at the loss, before writing again
	Finished      int64 `json:"finished"`       // lost after their writes
	Unfenced      int64 `json:"unfenced"`       // of all of them, those without a fence
	WritesRefused int64 `json:"writes_refused"` // writes (and entries) the fences refused
}

// WaitStats are lock wait percentiles in milliseconds (log buckets about 9%
// wide, so each is an upper bound within 9%).
type WaitStats struct {
	Count int64   `json:"count"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"`
}

// PoolReport is a pool's state at the end of the run.
type PoolReport struct {
	Name        string  `json:"name"`
	MaxConns    int32   `json:"max_conns"`
	Total       int32   `json:"total"`
	InUse       int32   `json:"in_use"`
	Waiting     int64   `json:"waiting"`
	Acquires    int64   `json:"acquires"`
	EmptyWaits  int64   `json:"empty_acquires"` // acquires that had to wait for a connection
	Canceled    int64   `json:"canceled_acquires"`
	WaitTotalMS float64 `json:"wait_total_ms"`
}

// Report returns the report of the run so far (or of the last run, once
// stopped: Stop's final checks are in it then).
func (s *Sim) Report() Report {
	st := s.Status()
	s.mu.Lock()
	d := s.ran
	if s.run != nil {
		d += time.Since(s.started)
	}
	audited, auditErr, stopped := s.audited, s.auditErr, s.run == nil
	sys, convs := s.sc.Systems, s.sc.Conversations
	goroutines, hooks := 0, 0
	for _, dr := range s.sc.Drivers {
		goroutines += dr.Goroutines
		if dr.Kind == workers.KindHook {
			hooks += dr.Goroutines
		}
	}
	s.mu.Unlock()

	r := Report{
		Scenario:            st.Scenario,
		LocksEnabled:        st.LocksEnabled,
		OK:                  st.OK() && audited && auditErr == nil,
		Invariants:          st.Invariants,
		Workers:             st.Workers,
		Losses:              s.rec.losses.load(),
		LockOrderInversions: s.rec.orderInversions(),
		SharedPool:          st.SharedPool,
		Agents:              st.Agents,
		Goroutines:          goroutines,
		HookGoroutines:      hooks,
		DurationSec:         d.Seconds(),
		Sections:            s.rec.sections.Load(),
		Hooks:               s.rec.hooks.Load(),
		Phantoms:            s.locks.Phantoms(),
		EventsDropped:       s.rec.dropped.Load(),
		PeakRSSBytes:        peakRSS(),
		Wait: WaitStats{
			Count: s.rec.waits.count.Load(),
			P50:   ms(s.rec.waits.quantile(0.50)),
			P90:   ms(s.rec.waits.quantile(0.90)),
			P99:   ms(s.rec.waits.quantile(0.99)),
			Max:   ms(time.Duration(s.rec.waits.max.Load())),
		},
	}
	var attempts, errs int64
	for _, c := range st.Workers {
		attempts, errs = attempts+c.Attempts, errs+c.Errors
	}
	r.Errors = s.rec.errs.stats(attempts, errs)
	r.OK = r.OK && !r.Errors.TooMany
	if sys&SystemTurns != 0 && s.turns != nil {
		st := s.turns.Stats()
		r.Conversations, r.Turns = convs, &st
	}
	if sys&SystemJobs != 0 && s.jobs != nil {
		st := s.jobs.Stats()
		r.LeaseStore, r.Resources, r.Jobs = s.opts.LeaseStore, s.jobs.Resources(), &st
	}
	s.mu.Lock()
	r.Deadlocks = s.deadStats
	s.mu.Unlock()
	if !audited && stopped {
		r.AuditError = "the run was not stopped through Stop: no final checks"
	}
	if auditErr != nil {
		r.AuditError = auditErr.Error()
	}
	if d > 0 {
		r.SectionsPerS = float64(r.Sections) / d.Seconds()
		r.HooksPerS = float64(r.Hooks) / d.Seconds()
	}
	for _, p := range st.Pools {
		r.Pools = append(r.Pools, PoolReport{
			Name: p.Name, MaxConns: p.MaxConns, Total: p.Total, InUse: p.InUse, Waiting: p.Waiting,
			Acquires: p.Acquires, EmptyWaits: p.Empty, Canceled: p.Canceled, WaitTotalMS: ms(p.WaitTotal),
		})
	}
	return r
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// peakRSS reads the process's peak resident set size (Linux), or 0.
func peakRSS() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			fields := strings.Fields(rest)
			if len(fields) >= 1 {
				kb, _ := strconv.ParseInt(fields[0], 10, 64)
				return kb * 1024
			}
		}
	}
	return 0
}

// Violations is the number of invariant violations, all invariants
// together.
func (r Report) Violations() int64 {
	n := int64(0)
	for _, inv := range r.Invariants {
		n += inv.Violations
	}
	return n
}

// WriteText writes the report for people.
func (r Report) WriteText(w io.Writer) error {
	var b bytes.Buffer
	locks := "on"
	if !r.LocksEnabled {
		locks = "OFF"
	}
	pool := "separate lock and work pools"
	if r.SharedPool {
		pool = "one shared pool"
	}
	var size []string
	if r.Agents > 0 {
		size = append(size, fmt.Sprintf("%d agents", r.Agents))
	}
	if r.Conversations > 0 {
		size = append(size, fmt.Sprintf("%d conversations", r.Conversations))
	}
	if r.Resources > 0 {
		size = append(size, fmt.Sprintf("%d lease resources", r.Resources))
	}
	if d := r.Deadlocks; d != nil && d.Parties > 0 {
		size = append(size, fmt.Sprintf("%d processes making deadlocks", d.Parties))
	}
	size = append(size, fmt.Sprintf("%d goroutines (%d hook goroutines)", r.Goroutines, r.HookGoroutines))
	fmt.Fprintf(&b, "scenario %s: %s, locks %s, %s, %.1fs\n",
		r.Scenario, strings.Join(size, ", "), locks, pool, r.DurationSec)
	fmt.Fprintf(&b, "critical sections: %d (%.0f/s), hooks %d (%.0f/s); lock wait p50 %.1fms p90 %.1fms p99 %.1fms max %.1fms\n\n",
		r.Sections, r.SectionsPerS, r.Hooks, r.HooksPerS, r.Wait.P50, r.Wait.P90, r.Wait.P99, r.Wait.Max)

	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "WORKER\tATTEMPTS\tACQUIRED\tSKIPPED\tTIMEOUTS\tREENTRANT\tLOST\tERRORS\t")
	for _, k := range workers.AllKinds {
		c := r.Workers[string(k)]
		if c == (model.Counters{}) {
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", k, c.Attempts, c.Acquired, c.Skipped, c.Timeouts, c.Reentrant, c.Lost, c.Errors)
	}
	tw.Flush()
	if l := r.Losses; l.Sections > 0 {
		fmt.Fprintf(&b, "\nlost locks: %d critical section(s): %d aborted by the fence (%d write(s) refused), %d stopped at the loss, %d lost after their writes",
			l.Sections, l.Refused, l.WritesRefused, l.Stopped, l.Finished)
		if l.Unfenced > 0 {
			fmt.Fprintf(&b, "; %d unfenced (nothing refused their writes)", l.Unfenced)
		}
		b.WriteString("\n")
	}

	if t := r.Turns; t != nil {
		fmt.Fprintf(&b, "\nturns (%d conversations): %d committed, %d redeliveries answered once, %d extends, %d forgot to extend, "+
			"%d stale commits refused by the fence, %d releases found the hold expired; %d pod crashes (%d turns cut off), "+
			"%d Redis outages (%d turns refused, %d run unprotected by FailOpen)\n",
			r.Conversations, t.Committed, t.Duplicates, t.Extended, t.Forgot, t.StaleRefused, t.Expired, t.PodCrashes, t.Crashed,
			t.Outages, t.Unavailable, t.FailOpen)
	}
	if j := r.Jobs; j != nil {
		fmt.Fprintf(&b, "\njobs (%d resources, leases on %s): %d jobs, %d tile sets written, %d read whole, %d upgrades, %d bulk retries; "+
			"%d workers died and %d stalled (%d stopped before writing), %d stale grants recovered (audited), %d writes interrupted\n",
			r.Resources, r.LeaseStore, j.Jobs, j.TileSets, j.Reads, j.Upgrades, j.BulkRetries, j.Deaths, j.Stalls, j.StaleStopped,
			j.Recoveries, j.Interrupted)
		for _, w := range j.Waits {
			fmt.Fprintf(&b, "  project %-4s %5d jobs, wait for a slot: avg %.0fms, max %.0fms\n", w.Project, w.Jobs, w.AvgWaitMS, w.MaxWaitMS)
		}
	}
	if d := r.Deadlocks; d != nil {
		made := 0
		var kinds []string
		for k, n := range d.Made {
			made += n
			kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
		}
		slices.Sort(kinds)
		if made == 0 {
			// Watching another scenario: only what it reported matters.
			fmt.Fprintf(&b, "\ndeadlocks: none made, %d reported over %d polls of every %s\n", d.Reported, d.Polls, DeadlockPoll)
		} else {
			fmt.Fprintf(&b, "\ndeadlocks: %d made (%s), %d reported over %d polls of every %s; %d checked: %d missed, %d reported late, "+
				"%d reported that no one made; the slowest took %d poll(s)\n",
				made, strings.Join(kinds, ", "), d.Reported, d.Polls, DeadlockPoll, d.Checked, d.Missed, d.Late, d.Unexpected, d.MaxPolls)
			if d.Short > 0 {
				fmt.Fprintf(&b, "  %d made cycle(s) not checked: broken before two whole polls could see them (slow polls)\n", d.Short)
			}
		}
	}

	b.WriteString("\n")
	for _, p := range r.Pools {
		fmt.Fprintf(&b, "pool %-6s max %3d  open %3d  in use %3d  waiting %3d  acquires %d (%d waited, %d abandoned)\n",
			p.Name, p.MaxConns, p.Total, p.InUse, p.Waiting, p.Acquires, p.EmptyWaits, p.Canceled)
	}
	if r.Phantoms > 0 {
		fmt.Fprintf(&b, "phantom locks cleaned: %d\n", r.Phantoms)
	}

	b.WriteString("\ninvariants:\n")
	for _, inv := range r.Invariants {
		mark := "ok    "
		if inv.Violations > 0 {
			mark = "BROKEN"
		}
		fmt.Fprintf(&b, "  %s %-40s %d", mark, inv.Name, inv.Violations)
		if inv.Last != "" {
			fmt.Fprintf(&b, "  (last: %s)", inv.Last)
		}
		b.WriteString("\n")
	}
	if r.AuditError != "" {
		fmt.Fprintf(&b, "final checks incomplete: %s\n", r.AuditError)
	}
	if e := r.Errors; e.Errors > 0 {
		b.WriteString("\nerrors:\n")
		for _, c := range e.ByError {
			fmt.Fprintf(&b, "  %6d× %s\n", c.Count, c.Error)
		}
		fmt.Fprintf(&b, "  %s\n", e.Line())
	}
	switch {
	case r.OK:
		b.WriteString("\nOK: no invariant broken\n")
	case r.Violations() > 0:
		fmt.Fprintf(&b, "\nFAIL: %d invariant violation(s)\n", r.Violations())
	case r.Errors.TooMany:
		fmt.Fprintf(&b, "\nFAIL: %.1f%% of the attempts failed with an error (a run may have %.0f%%): no invariant broken, but the run did not do its work\n",
			100*r.Errors.Share, 100*MaxErrorShare)
	default:
		b.WriteString("\nFAIL: the final checks did not complete\n")
	}
	_, err := w.Write(b.Bytes())
	return err
}
