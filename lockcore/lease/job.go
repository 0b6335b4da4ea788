package lease

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/locktop/locktop/internal/leasedb"
	"github.com/locktop/locktop/lockcore"
)

// Job is one long-running operation of seed 004 §7: it runs only in a slot
// free under the caps, and the locks it takes are owned by it.
type Job struct {
	ID      string // unique among live jobs
	Project string
	Map     string // may be empty; a job with a Map counts against MaxMapJobsPerProject
	Kind    string // free text for monitors ("tiles", "import", ...)
}

// JobSlot is a running job's place under the caps. Call Finish when the
// job ends.
type JobSlot struct {
	m     *Manager
	job   Job
	owner string

	ctx    context.Context
	cancel context.CancelCauseFunc

	mu       sync.Mutex
	locks    []*Lock // held locks taken with the slot's context
	deadline time.Time
	timer    *time.Timer
	err      error // nil while queued or running; wraps ErrLost, or ErrReleased after Finish
	done     bool
}

type slotKey struct{}

func slotIn(ctx context.Context) *JobSlot {
	s, _ := ctx.Value(slotKey{}).(*JobSlot)
	return s
}

// jobOwner is the owner a job's locks carry in the table.
func jobOwner(id string) string { return "job:" + id }

// StartJob queues j and waits until it may run: until the caps (global,
// per project, map jobs per project) leave a slot that fair queuing gives
// to j. Between projects the queue is fair: the next slot goes to the job
// whose project has the fewest jobs running plus queued ahead of it, so a
// project with 100 queued jobs does not starve one with 1. It waits until
// ctx ends (no Wait bound); the queued job is then removed. The job
// heartbeats like a lock from the moment it is queued, so every process
// sees it alive, and a job whose process dies frees its slot when its lease
// passes. ctx is also the parent of the slot's context.
func (m *Manager) StartJob(ctx context.Context, j Job) (*JobSlot, error) {
	fail := func(err error) (*JobSlot, error) {
		return nil, &Error{Op: "start job " + j.ID, Resource: Project(j.Project), Err: err}
	}
	if j.ID == "" || j.Project == "" {
		return fail(errors.New("lease: a job needs an ID and a Project"))
	}
	if m.isClosed() {
		return fail(ErrClosed)
	}
	s := &JobSlot{m: m, job: j, owner: jobOwner(j.ID)}
	s.ctx, s.cancel = context.WithCancelCause(context.WithValue(ctx, slotKey{}, s))
	sent := time.Now()
	ok, err := m.st.enqueue(ctx, jobRow{id: j.ID, owner: s.owner, project: j.Project, mapID: j.Map, kind: j.Kind,
		process: m.opts.Owner}, m.opts.Lease)
	if err != nil {
		s.cancel(err)
		return fail(err)
	}
	if !ok {
		s.cancel(ErrJobExists)
		return fail(ErrJobExists)
	}
	s.mu.Lock()
	s.deadline = lockcore.LocalDeadline(sent, m.opts.Lease)
	s.timer = time.AfterFunc(time.Until(s.deadline), s.expire)
	s.mu.Unlock()
	m.mu.Lock()
	m.jobs[j.ID] = s
	m.mu.Unlock()

	t := m.st.hub().join(jobsKey, false)
	defer m.st.hub().leave(jobsKey, t, false)
	bo := newBackoff(m.opts)
	// A scheduling pass at first, then every Lease/2: a job that ends
	// starts the next ones itself (Finish), so a waiter needs a pass of its
	// own only to free the slots of jobs whose process died. In between it
	// only reads its job's state, on a wake-up or its backoff.
	var lastPass time.Time
	for {
		var running, exists bool
		var err error
		if time.Since(lastPass) >= m.opts.Lease/2 {
			lastPass = time.Now()
			var rows []jobRow
			rows, err = m.schedule(ctx)
			if i := slices.IndexFunc(rows, func(r jobRow) bool { return r.id == j.ID }); i >= 0 {
				running, exists = rows[i].running, true
			}
		} else {
			running, exists, err = m.st.jobRunning(ctx, j.ID)
		}
		if err == nil && !exists {
			s.lose("its queued row is gone (its lease passed)")
		}
		if err == nil && s.Err() != nil {
			err = s.Err()
		}
		if err != nil {
			s.abandon()
			if ctx.Err() != nil {
				return fail(context.Cause(ctx))
			}
			return fail(err)
		}
		if running {
			return s, nil
		}
		timer := time.NewTimer(bo.next())
		select {
		case <-t.ch:
		case <-timer.C:
		case <-ctx.Done():
		}
		timer.Stop()
		if ctx.Err() != nil {
			s.abandon()
			return fail(context.Cause(ctx))
		}
	}
}

// schedule runs one scheduling pass with this Manager's caps.
func (m *Manager) schedule(ctx context.Context) ([]jobRow, error) {
	c := caps{global: m.opts.MaxGlobalJobs, project: m.opts.MaxJobsPerProject, maps: m.opts.MaxMapJobsPerProject}
	return m.st.schedule(ctx, func(now time.Time, jobs []jobRow, served map[string]int64) jobPlan {
		return planJobs(now, jobs, served, c)
	})
}

// abandon removes a job that never ran (its StartJob failed or gave up).
func (s *JobSlot) abandon() {
	s.mu.Lock()
	s.done = true
	s.timer.Stop()
	if s.err == nil {
		s.err = ErrReleased
	}
	s.mu.Unlock()
	s.m.untrackJob(s)
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	// The job may have been started just as its caller gave up: its slot
	// goes to the next job at once.
	if found, err := s.m.st.finish(ctx, s.job.ID); found && err == nil {
		_, _ = s.m.schedule(ctx)
	}
	s.cancel(ErrReleased)
}

func (m *Manager) untrackJob(s *JobSlot) {
	m.mu.Lock()
	if m.jobs[s.job.ID] == s {
		delete(m.jobs, s.job.ID)
	}
	m.mu.Unlock()
}

// Job returns the job.
func (s *JobSlot) Job() Job { return s.job }

// Owner returns the owner the job's locks carry: "job:ID".
func (s *JobSlot) Owner() string { return s.owner }

// Context returns the job's context: derived from StartJob's, cancelled
// with cause ErrLost if the job's row is lost (its lease passed unrenewed)
// and with ErrReleased after Finish. Locks acquired with it (or with a
// context derived from it) are owned by the job: their owner is "job:ID",
// stale recovery leaves them alone while the job is alive, and Finish
// releases those still held. A later job reusing the ID (once this one's
// lease passed) does not protect them.
func (s *JobSlot) Context() context.Context { return s.ctx }

// Err is nil while the job is queued or running, wraps ErrLost once it is
// lost, and is ErrReleased after Finish.
func (s *JobSlot) Err() error {
	s.mu.Lock()
	err, late := s.err, lapsed(s.err, s.deadline)
	s.mu.Unlock()
	if late {
		s.expire()
		return s.Err()
	}
	return err
}

// Finish releases the locks the job still holds, frees its slot (the next
// queued job, fairly chosen, starts) and ends its context. It works even if
// ctx has ended. Further calls do nothing. A job whose row was lost returns
// an error wrapping ErrLost.
func (s *JobSlot) Finish(ctx context.Context) error {
	s.mu.Lock()
	if s.done {
		s.mu.Unlock()
		return nil
	}
	s.done = true
	s.timer.Stop()
	locks := slices.Clone(s.locks)
	lost := s.err
	if s.err == nil {
		s.err = ErrReleased
	}
	s.mu.Unlock()
	s.m.untrackJob(s)
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
	}
	var errs []error
	for _, l := range slices.Backward(locks) {
		if err := l.Release(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	found, err := s.m.st.finish(ctx, s.job.ID)
	switch {
	case err != nil:
		errs = append(errs, err)
	case !found && lost == nil:
		errs = append(errs, fmt.Errorf("%w: the job's row was gone", ErrLost))
	case lost != nil:
		errs = append(errs, lost)
	}
	if _, err := s.m.schedule(ctx); err != nil {
		errs = append(errs, fmt.Errorf("lease: starting the next job: %w", err))
	}
	s.cancel(ErrReleased)
	if len(errs) > 0 {
		return &Error{Op: "finish job " + s.job.ID, Resource: Project(s.job.Project), Err: errors.Join(errs...)}
	}
	return nil
}

func (s *JobSlot) adopt(l *Lock) {
	s.mu.Lock()
	s.locks = append(s.locks, l)
	s.mu.Unlock()
}

func (s *JobSlot) disown(l *Lock) {
	s.mu.Lock()
	if i := slices.Index(s.locks, l); i >= 0 {
		s.locks = slices.Delete(s.locks, i, i+1)
	}
	s.mu.Unlock()
}

func (s *JobSlot) expire() {
	s.mu.Lock()
	if time.Now().Before(s.deadline) {
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	s.lose("its lease ran out before a heartbeat renewed it")
}

func (s *JobSlot) extend(deadline time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil || !deadline.After(s.deadline) {
		return
	}
	s.deadline = deadline
	s.timer.Reset(time.Until(deadline))
}

func (s *JobSlot) lose(why string) {
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return
	}
	s.err = fmt.Errorf("%w: job %s: %s", ErrLost, s.job.ID, why)
	s.timer.Stop()
	err := s.err
	s.mu.Unlock()
	s.m.untrackJob(s)
	s.cancel(err)
}

// jobRow is one job's row.
type jobRow struct {
	id, owner, project, mapID, kind, process string
	running                                  bool
	seq                                      int64
	queued, started                          time.Time
	leaseExpires, heartbeat                  time.Time
}

func jobRowOf(j leasedb.Job) jobRow {
	return jobRow{id: j.ID, owner: j.Owner, project: j.Project, mapID: j.Map, kind: j.Kind, process: j.Process, running: j.Running,
		seq: j.Seq, queued: j.Queued, started: j.Started, leaseExpires: j.LeaseExpires, heartbeat: j.Heartbeat}
}

// jobPlan is what a scheduling pass writes.
type jobPlan struct {
	drop   []string         // jobs whose lease passed: their slots are free
	start  []string         // queued jobs that start now
	served map[string]int64 // the projects served now, with their new turn
}

type caps struct{ global, project, maps int }

// planJobs is the scheduler: it frees the slots of jobs whose lease passed
// and starts queued jobs while the caps allow, fairly between projects.
//
// Fairness is per-project round robin with credit for what runs (the
// ranking River users ask for in #1060): a queued job's key is the number
// of its project's jobs running plus its rank among its project's queued
// jobs; keys are served lowest first; between equal keys the project
// served longest ago (served: each project's last turn, a number that
// grows with every start) goes first, then arrival. A project whose cap is
// full is skipped, not waited for, so it blocks no one else.
func planJobs(now time.Time, jobs []jobRow, served map[string]int64, c caps) jobPlan {
	p := jobPlan{served: map[string]int64{}}
	turn := int64(0)
	for _, v := range served {
		turn = max(turn, v)
	}
	var queued []jobRow
	running := 0
	perProject := map[string]int{}
	mapsPerProject := map[string]int{}
	for _, j := range jobs {
		switch {
		case !j.leaseExpires.After(now):
			p.drop = append(p.drop, j.id)
		case j.running:
			running++
			perProject[j.project]++
			if j.mapID != "" {
				mapsPerProject[j.project]++
			}
		default:
			queued = append(queued, j)
		}
	}
	slices.SortFunc(queued, func(a, b jobRow) int { return cmp.Compare(a.seq, b.seq) })
	type candidate struct {
		j   jobRow
		key int
	}
	rank := map[string]int{}
	cands := make([]candidate, 0, len(queued))
	for _, j := range queued {
		rank[j.project]++
		cands = append(cands, candidate{j, perProject[j.project] + rank[j.project]})
	}
	slices.SortStableFunc(cands, func(a, b candidate) int {
		return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(served[a.j.project], served[b.j.project]), cmp.Compare(a.j.seq, b.j.seq))
	})
	for _, cd := range cands {
		j := cd.j
		if c.global > 0 && running >= c.global {
			break
		}
		if c.project > 0 && perProject[j.project] >= c.project {
			continue
		}
		if j.mapID != "" && c.maps > 0 && mapsPerProject[j.project] >= c.maps {
			continue
		}
		p.start = append(p.start, j.id)
		turn++
		p.served[j.project] = turn
		running++
		perProject[j.project]++
		if j.mapID != "" {
			mapsPerProject[j.project]++
		}
	}
	return p
}

// after returns jobs as a plan leaves them.
func (p jobPlan) after(jobs []jobRow) []jobRow {
	out := make([]jobRow, 0, len(jobs))
	for _, j := range jobs {
		if slices.Contains(p.drop, j.id) {
			continue
		}
		if slices.Contains(p.start, j.id) {
			j.running = true
		}
		out = append(out, j)
	}
	return out
}

// changed reports whether the plan frees or starts anything.
func (p jobPlan) changed() bool { return len(p.drop) > 0 || len(p.start) > 0 }

func isRunning(state string) bool { return leasedb.IsRunning(state) }
