package workers

// A job's slot under the caps: started, registered, checked against the
// caps by the lease store's own clock, and ended.

import (
	"context"
	"fmt"
	"time"

	"github.com/locktop/locktop/lockcore/lease"
)

// slot is a running job under the caps (with locking on, a lease.JobSlot).
type slot struct {
	j     *Jobs
	js    *lease.JobSlot
	node  *lease.Manager // the node that runs it
	rowID int64
	ctx   context.Context
}

// startJob queues a job and waits for its slot (with locking on), records
// the wait, and registers it for the caps check.
func (j *Jobs) startJob(ctx context.Context, kind string, project, mapID string) (*slot, error) {
	return j.startJobOn(ctx, j.node(), kind, project, mapID)
}

// startJobOn is startJob on the given node.
func (j *Jobs) startJobOn(ctx context.Context, node *lease.Manager, kind string, project, mapID string) (*slot, error) {
	s := &slot{j: j, ctx: ctx, node: node}
	id := j.newJob()
	start := time.Now()
	if j.env.Locking() {
		js, err := s.node.StartJob(ctx, lease.Job{ID: id, Project: project, Map: mapID, Kind: kind})
		if err != nil {
			return nil, err
		}
		s.js, s.ctx = js, js.Context()
	}
	j.waited(project, time.Since(start))
	j.jobs.Add(1)
	if err := j.jobRunning(ctx, s, id, project, mapID); err != nil {
		s.done()
		return nil, err
	}
	return s, nil
}

// waited records a job's wait for a slot, and reports a project other
// than the flooding one that waited longer than StarveBound.
func (j *Jobs) waited(project string, d time.Duration) {
	j.mu.Lock()
	w := j.waits[project]
	if w == nil {
		w = &projectWait{}
		j.waits[project] = w
	}
	w.n++
	w.total += d
	w.max = max(w.max, d)
	j.mu.Unlock()
	if project != j.Projects()[0] && d > j.opts.StarveBound {
		j.report(InvStarvation, fmt.Sprintf("wait:%s/%d", project, time.Now().UnixNano()),
			fmt.Sprintf("project %s: a job waited %s for a slot (bound %s) while %s flooded the queue",
				project, d.Round(time.Millisecond), j.opts.StarveBound, j.Projects()[0]))
	}
}

// jobRunningSQL registers a running job and counts the live ones, globally,
// of its project, and map jobs of its project; the table lock makes the
// counts exact.
const jobRunningSQL = `
	WITH ins AS (INSERT INTO lease_jobs (job, project, map, proc) VALUES ($1, $2, $3, $4) RETURNING id),
	live AS (SELECT project, map FROM lease_jobs j WHERE j.at > pg_postmaster_start_time()
		AND (j.proc = $4 OR EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.application_name = '` + LiveAppPrefix + `' || j.proc)))
	SELECT (SELECT id FROM ins), count(*) + 1, count(*) FILTER (WHERE project = $2) + 1,
		count(*) FILTER (WHERE project = $2 AND map <> '') + (CASE WHEN $3 <> '' THEN 1 ELSE 0 END) FROM live`

func (j *Jobs) jobRunning(ctx context.Context, s *slot, id, project, mapID string) error {
	var global, perProject, mapJobs int64
	c, err := j.env.DB.acquire(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	tx, err := c.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, "LOCK TABLE lease_jobs IN SHARE ROW EXCLUSIVE MODE"); err != nil {
		return err
	}
	if err := tx.QueryRow(ctx, jobRunningSQL, id, project, mapID, j.env.Proc).Scan(&s.rowID, &global, &perProject, &mapJobs); err != nil {
		return fmt.Errorf("registering job %s: %w", id, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	o := j.opts
	over := func() bool {
		return global > int64(o.MaxGlobalJobs) || perProject > int64(o.MaxJobsPerProject) || (mapID != "" && mapJobs > int64(o.MaxMapJobsPerProject))
	}
	if over() && j.env.Locking() {
		// A job whose slot lease lapsed (heartbeats late under load) stays
		// registered until it ends, while the store has rightly given its
		// slot to the next job: the caps are on valid slots, by the
		// store's clock, so count again those only.
		global, perProject, mapJobs, err = j.validSlots(ctx, project)
		if err != nil {
			return nil // the store did not answer: no verdict
		}
	}
	if over() {
		j.report(InvJobCaps, "job:"+id, fmt.Sprintf("job %s started with %d jobs running (cap %d), %d of project %s (cap %d), %d map jobs of it (cap %d)",
			id, global, o.MaxGlobalJobs, perProject, project, o.MaxJobsPerProject, mapJobs, o.MaxMapJobsPerProject))
	}
	return nil
}

// validSlots counts the running jobs whose slot lease the store still
// holds valid by its own clock: all, of project, and map jobs of it.
func (j *Jobs) validSlots(ctx context.Context, project string) (global, perProject, mapJobs int64, err error) {
	jobs, err := j.nodes[0].Jobs(ctx)
	if err != nil {
		return 0, 0, 0, err
	}
	for _, in := range jobs {
		if !in.Running || in.LeaseLeft <= 0 {
			continue
		}
		global++
		if in.Project == project {
			perProject++
			if in.Map != "" {
				mapJobs++
			}
		}
	}
	return global, perProject, mapJobs, nil
}

// done ends the job: deregistered first, then its slot freed (and what it
// still holds released).
func (s *slot) done() {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	if s.rowID != 0 {
		_, _ = s.j.env.DB.Exec(ctx, "DELETE FROM lease_jobs WHERE id = $1", s.rowID)
	}
	if s.js != nil {
		_ = s.js.Finish(ctx)
	}
}
