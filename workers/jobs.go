package workers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/lockcore/lease"
	"github.com/locktop/locktop/model"
)

// Points where seed 004's workloads stop in tests.
const (
	PointHoldEntered Point = "hold.entered" // a section on a lease resource registered, before its work
	PointTilesRead   Point = "tiles.read"   // an upgradeable reader read the tile set, before it decides to write
	PointTilesHalf   Point = "tiles.half"   // a writer has written half of a tile set's tiles
	PointStalled     Point = "stalled"      // a stalled writer after its stall, before it looks at its lease
)

// tilesName is the manifest name of a map's tile set.
const tilesName = "tiles"

// JobOptions configure seed 004's job system.
type JobOptions struct {
	// Nodes is how many healthy nodes (lease Managers, each with its own
	// owner) run the workloads (default 3).
	Nodes int
	// Open opens a Manager on the lease store with the given options: every
	// Manager of the workloads shares the store's tables.
	Open func(ctx context.Context, o lease.Options) (*lease.Manager, error)
	// Dir holds the maps' directories (tile sets written with the §5.1
	// sequence); a scratch directory of the caller's.
	Dir string
	// Projects, and maps and sketches per project (defaults 3, 3, 2).
	// Project p1 floods the queue.
	Projects, Maps, Sketches int
	// Lease of the healthy nodes' grants (default 3s); they heartbeat every
	// third of it and recover a stale holder whose heartbeat is two
	// heartbeats old.
	Lease time.Duration
	// Wait bounds an acquire (default 4s).
	Wait time.Duration
	// The job caps (defaults 4, 2 and 1).
	MaxGlobalJobs, MaxJobsPerProject, MaxMapJobsPerProject int
	// StarveBound is the longest a job of a project other than the
	// flooding one may wait for a slot (default 20s).
	StarveBound time.Duration
	// BulkAttempts is how often a bulk job tries to take its locks
	// (default 3).
	BulkAttempts int
	// Logger gets the Managers' warnings (nil: discarded).
	Logger *slog.Logger
}

// JobTiming is how long seed 004's work takes (means of a uniform jitter
// of plus or minus half).
type JobTiming struct {
	Step  time.Duration // between reads and writes of a section
	Tiles time.Duration // writing one tile set
	// WriteShare is the share of upgradeable readers that decide to write.
	WriteShare float64
}

// MapRef names one map of a project.
type MapRef struct{ Project, Map string }

// ProjectWait is how long a project's jobs waited for a slot.
type ProjectWait struct {
	Project   string  `json:"project"`
	Jobs      int64   `json:"jobs"`
	MaxWaitMS float64 `json:"max_wait_ms"`
	AvgWaitMS float64 `json:"avg_wait_ms"`
}

// JobStats count what the jobs did, beyond the counters per kind.
type JobStats struct {
	Jobs         int64         `json:"jobs"`          // jobs that got a slot
	TileSets     int64         `json:"tile_sets"`     // tile sets committed
	Reads        int64         `json:"reads"`         // tile sets read whole
	Upgrades     int64         `json:"upgrades"`      // upgradeable readers that upgraded
	Recoveries   int64         `json:"recoveries"`    // stale grants taken over (audited)
	Deaths       int64         `json:"deaths"`        // workers that died holding a lease
	Stalls       int64         `json:"stalls"`        // workers whose heartbeats stalled past their lease
	StaleStopped int64         `json:"stale_stopped"` // stalled workers that found their lease lost and stopped before writing
	Interrupted  int64         `json:"interrupted"`   // writes interrupted mid-sequence
	BulkRetries  int64         `json:"bulk_retries"`  // bulk jobs' retries of WithAll
	Waits        []ProjectWait `json:"project_waits"` // slot waits per project
}

// doomedGrant is a grant of the stalled node, whose heartbeats never run:
// the only grants a stale recovery may take.
type doomedGrant struct {
	owner    string
	before   time.Time // the acquire began; the grant's lease ran out no earlier than before + lease
	lease    time.Duration
	released bool // its worker released it itself
	checked  bool // found gone by an Audit, and judged
}

type projectWait struct {
	n     int64
	total time.Duration
	max   time.Duration
}

// Jobs runs seed 004's job system over a few projects, maps and sketches,
// through lockcore/lease: map tile generation and calibration (map write,
// the §5.1 atomic write sequence), viewers and exports (map read), sketch
// edits (sketch write), bulk project jobs (WithAll in the global
// order), upgradeable readers, and jobs under the caps with one project
// flooding the queue. Its faults: a worker that dies holding a lease, one
// whose heartbeats stall past its lease, a write interrupted mid-sequence.
// Every section registers its hold in the workloads' schema, so the checks
// run in the database as seed 001's do. Locking follows the Env's switch:
// off, nothing is locked, no slot is asked for, and tile sets are written
// in place. Create it with NewJobs; close it with Close.
type Jobs struct {
	env   *Env
	opts  JobOptions
	nodes []*lease.Manager
	stall *lease.Manager // a node whose heartbeats never run (dead and stalled workers)

	timing atomic.Pointer[JobTiming]
	seq    atomic.Int64

	interrupt atomic.Int32 // pending interrupted writes

	mu       sync.Mutex
	doomed   map[string]*doomedGrant // by resource/fence
	waits    map[string]*projectWait
	reported keySet

	jobs, tileSets, reads, upgrades, deaths, stalls, staleStopped, interrupted, bulkRetries atomic.Int64
	recoveries                                                                              atomic.Int64
}

// NewJobs opens the nodes' Managers and makes sure every map has a
// committed tile set and every sketch a row.
func NewJobs(ctx context.Context, env *Env, opts JobOptions) (*Jobs, error) {
	opts.Nodes = cmp.Or(opts.Nodes, 3)
	opts.Projects = cmp.Or(opts.Projects, 3)
	opts.Maps = cmp.Or(opts.Maps, 3)
	opts.Sketches = cmp.Or(opts.Sketches, 2)
	opts.Lease = cmp.Or(opts.Lease, 3*time.Second)
	opts.Wait = cmp.Or(opts.Wait, 4*time.Second)
	opts.MaxGlobalJobs = cmp.Or(opts.MaxGlobalJobs, 4)
	opts.MaxJobsPerProject = cmp.Or(opts.MaxJobsPerProject, 2)
	opts.MaxMapJobsPerProject = cmp.Or(opts.MaxMapJobsPerProject, 1)
	opts.StarveBound = cmp.Or(opts.StarveBound, 20*time.Second)
	opts.BulkAttempts = cmp.Or(opts.BulkAttempts, 3)
	if opts.Open == nil || opts.Dir == "" {
		return nil, errors.New("workers: JobOptions need Open and Dir")
	}
	j := &Jobs{env: env, opts: opts, doomed: map[string]*doomedGrant{}, waits: map[string]*projectWait{}}
	j.timing.Store(&JobTiming{})
	hb := opts.Lease / 3
	for i := range opts.Nodes {
		m, err := opts.Open(ctx, lease.Options{
			Owner: fmt.Sprintf("%s/node-%d", env.Proc, i+1), Lease: opts.Lease, Heartbeat: hb, Grace: 2 * hb, Wait: opts.Wait,
			MaxGlobalJobs: opts.MaxGlobalJobs, MaxJobsPerProject: opts.MaxJobsPerProject, MaxMapJobsPerProject: opts.MaxMapJobsPerProject,
			Logger: opts.Logger,
		})
		if err != nil {
			j.Close()
			return nil, fmt.Errorf("workers: opening lease node %d: %w", i+1, err)
		}
		j.nodes = append(j.nodes, m)
	}
	// The stalled node's leases are half the healthy ones' and never
	// renewed: a worker on it has died or stalled, as far as the others
	// can tell.
	m, err := opts.Open(ctx, lease.Options{Owner: env.Proc + "/stalled-node", Lease: opts.Lease / 2, Heartbeat: -1, Grace: 2 * hb, Wait: opts.Wait, Logger: opts.Logger})
	if err != nil {
		j.Close()
		return nil, fmt.Errorf("workers: opening the stalled lease node: %w", err)
	}
	j.stall = m
	if err := j.ensure(ctx); err != nil {
		j.Close()
		return nil, err
	}
	return j, nil
}

// Close closes every node's Manager (releasing what they still hold).
func (j *Jobs) Close() {
	for _, m := range j.nodes {
		_ = m.Close()
	}
	if j.stall != nil {
		_ = j.stall.Close()
	}
}

// Options returns the options, defaults filled in.
func (j *Jobs) Options() JobOptions { return j.opts }

// SetTiming replaces the timing.
func (j *Jobs) SetTiming(t JobTiming) { j.timing.Store(&t) }

// Node returns the first healthy node's Manager (for listings).
func (j *Jobs) Node() *lease.Manager { return j.nodes[0] }

// Projects returns the project ids, the flooding one ("p1") first.
func (j *Jobs) Projects() []string {
	out := make([]string, j.opts.Projects)
	for i := range out {
		out[i] = "p" + strconv.Itoa(i+1)
	}
	return out
}

// Maps returns the maps of project p.
func (j *Jobs) Maps(p string) []MapRef {
	out := make([]MapRef, j.opts.Maps)
	for i := range out {
		out[i] = MapRef{Project: p, Map: p + "-m" + strconv.Itoa(i+1)}
	}
	return out
}

// Sketches returns the sketch ids of project p.
func (j *Jobs) Sketches(p string) []string {
	out := make([]string, j.opts.Sketches)
	for i := range out {
		out[i] = p + "-s" + strconv.Itoa(i+1)
	}
	return out
}

// Resources is how many projects, maps and sketches there are.
func (j *Jobs) Resources() int { return j.opts.Projects * (1 + j.opts.Maps + j.opts.Sketches) }

// PickProject returns the flooding project ("p1") with probability flood,
// else another at random.
func (j *Jobs) PickProject(flood float64) string {
	ps := j.Projects()
	if len(ps) == 1 || rand.Float64() < flood {
		return ps[0]
	}
	return ps[1+rand.IntN(len(ps)-1)]
}

// PickMap returns a map of project p at random; PickSketch a sketch.
func (j *Jobs) PickMap(p string) MapRef { ms := j.Maps(p); return ms[rand.IntN(len(ms))] }

// PickSketch returns a sketch of project p at random.
func (j *Jobs) PickSketch(p string) string { ss := j.Sketches(p); return ss[rand.IntN(len(ss))] }

func (j *Jobs) node() *lease.Manager { return j.nodes[rand.IntN(len(j.nodes))] }

func (j *Jobs) mapDir(m string) string { return filepath.Join(j.opts.Dir, "maps", m) }

// ensure gives every sketch a row and every map a committed tile set
// readable here (a manifest row may name a directory of a process that has
// gone: it is written again).
func (j *Jobs) ensure(ctx context.Context) error {
	var sketches []string
	for _, p := range j.Projects() {
		sketches = append(sketches, j.Sketches(p)...)
	}
	if _, err := j.env.DB.Exec(ctx, "INSERT INTO sketches (id) SELECT unnest($1::text[]) ON CONFLICT DO NOTHING", sketches); err != nil {
		return fmt.Errorf("workers: creating sketches: %w", err)
	}
	for _, p := range j.Projects() {
		for _, m := range j.Maps(p) {
			e, ok, err := j.nodes[0].Manifest(ctx, lease.Map(m.Map), tilesName)
			if err != nil {
				return fmt.Errorf("workers: reading the manifest of %s: %w", m.Map, err)
			}
			if ok && readable(e.Path) {
				continue
			}
			r := lease.Map(m.Map)
			err = j.nodes[0].With(ctx, r, lease.Write, func(ctx context.Context) error {
				_, err := lease.LockOf(ctx, r).WriteAtomic(ctx, lease.AtomicWrite{Dir: j.mapDir(m.Map), Name: tilesName, Fill: func(tmp string) error {
					return writeTiles(ctx, tmp, j.newSet(), 0, tileCount, nil)
				}})
				return err
			})
			if err != nil {
				return fmt.Errorf("workers: the first tile set of %s: %w", m.Map, err)
			}
		}
	}
	return nil
}

// newSet returns a tile set id unique across processes.
func (j *Jobs) newSet() string { return j.env.Proc + "-t" + strconv.FormatInt(j.seq.Add(1), 10) }

func (j *Jobs) newJob() string { return j.env.Proc + "-j" + strconv.FormatInt(j.seq.Add(1), 10) }

// InterruptNext makes the next map write stop half-way through its tile
// set, as a crash in the middle of the write sequence would.
func (j *Jobs) InterruptNext() { j.interrupt.Add(1) }

// Stats returns what the jobs did so far.
func (j *Jobs) Stats() JobStats {
	st := JobStats{
		Jobs: j.jobs.Load(), TileSets: j.tileSets.Load(), Reads: j.reads.Load(), Upgrades: j.upgrades.Load(),
		Recoveries: j.recoveries.Load(), Deaths: j.deaths.Load(), Stalls: j.stalls.Load(), StaleStopped: j.staleStopped.Load(),
		Interrupted: j.interrupted.Load(), BulkRetries: j.bulkRetries.Load(),
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, p := range slices.Sorted(mapsKeys(j.waits)) {
		w := j.waits[p]
		pw := ProjectWait{Project: p, Jobs: w.n, MaxWaitMS: msOf(w.max)}
		if w.n > 0 {
			pw.AvgWaitMS = msOf(w.total / time.Duration(w.n))
		}
		st.Waits = append(st.Waits, pw)
	}
	return st
}

// ResetStats zeroes the stats, for a new run.
func (j *Jobs) ResetStats() {
	for _, n := range []*atomic.Int64{&j.jobs, &j.tileSets, &j.reads, &j.upgrades, &j.recoveries, &j.deaths, &j.stalls,
		&j.staleStopped, &j.interrupted, &j.bulkRetries} {
		n.Store(0)
	}
	j.mu.Lock()
	j.waits = map[string]*projectWait{}
	j.mu.Unlock()
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func msOf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// report reports a subject once.
func (j *Jobs) report(inv Invariant, subject, detail string) {
	if j.reported.add(string(inv) + "\x00" + subject) {
		j.env.Rec.Violation(inv, subject, detail)
	}
}

// op is one workload's attempt on lease resources, for the counters.
type op struct {
	j     *Jobs
	kind  Kind
	label string
	start time.Time
	sec   section // the Loss a lost section reports
}

func (j *Jobs) op(kind Kind, label string) *op {
	return &op{j: j, kind: kind, label: label, start: time.Now()}
}

func (o *op) attempt(out model.Outcome, err error, body bool) {
	a := Attempt{Kind: o.kind, Label: o.label, Outcome: out, Wait: time.Since(o.start), Err: err, Body: body}
	if out == model.OutcomeLost {
		a.Loss = o.sec.loss()
	}
	o.j.env.Rec.Attempt(a)
}

// failed records err, a failure after the locks were taken, and returns it.
func (o *op) failed(ctx context.Context, err error) error {
	if err != nil {
		o.attempt(classify(ctx, err), err, true)
	}
	return err
}

// hold is a registered section on a lease resource.
type hold struct {
	id    int64
	res   lease.Resource
	mode  lease.Mode
	fence int64
}

// enter registers a section of kind on res in mode under fence (0: no
// lock), replacing hold except (0: none), and checks it against the other
// live holds: a conflicting one beside it is a writer beside another
// holder, unless both are fenced: then the older grant's lease was lost
// (its holder runs on; it is noted and marked, and if the lease store still
// lists it as granted, two grants conflict, which breaks the invariant all
// the same). If the entering section is the older one, it must not work:
// the error wraps ErrFenced.
func (o *op) enter(ctx context.Context, res lease.Resource, mode lease.Mode, fence int64, except int64) (*hold, error) {
	j := o.j
	h := &hold{res: res, mode: mode, fence: fence}
	if o.sec.fence == 0 {
		o.sec.fence = fence // the fence a lost section reports
	}
	var ids, fences []int64
	var who []string
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	err := j.env.DB.Get(ectx, "SELECT hold_id, other_ids, other_fences, other_who FROM enter_hold($1, $2, $3, $4, $5, $6)",
		[]any{res.String(), mode.String(), fence, string(o.kind), j.env.Proc, except}, &h.id, &ids, &fences, &who)
	if err != nil {
		return nil, fmt.Errorf("entering a section on %s: %w", res, err)
	}
	var lost []int64
	for i, other := range ids {
		switch {
		case fence == 0 || fences[i] == 0:
			j.report(InvExclusiveWriter, "hold:"+strconv.FormatInt(h.id, 10),
				fmt.Sprintf("%s: %s (%s) entered beside %s", res, o.kind, mode, who[i]))
		case fences[i] < fence:
			lost = append(lost, other)
			if j.granted(ctx, res, fences[i]) {
				j.report(InvExclusiveWriter, "hold:"+strconv.FormatInt(h.id, 10),
					fmt.Sprintf("%s: %s (%s, fence %d) granted beside %s, still granted", res, o.kind, mode, fence, who[i]))
			} else {
				j.env.Rec.Note(o.kind, lockcore.Key{}, fmt.Sprintf("%s: %s entered while a holder whose lease was lost ran on (%s): not an overlap",
					res, o.kind, who[i]))
			}
		default:
			lost = append(lost, h.id)
		}
	}
	if len(lost) > 0 {
		_, _ = j.env.DB.Exec(ectx, "UPDATE lease_holds SET lost = true WHERE id = ANY ($1)", lost)
	}
	if slices.Contains(lost, h.id) {
		o.sec.refused.Add(1)
		j.exit(h)
		return nil, fmt.Errorf("%w: %s on %s entered after its lease was lost (fence %d)", ErrFenced, o.kind, res, fence)
	}
	return h, nil
}

// granted reports whether the lease store lists res as granted under fence.
func (j *Jobs) granted(ctx context.Context, res lease.Resource, fence int64) bool {
	infos, err := j.nodes[0].Locks(ctx)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(infos, func(in lease.Info) bool { return in.Granted && in.Resource == res && in.Fence == fence })
}

// exit deregisters a section, on a fresh bounded context.
func (j *Jobs) exit(hs ...*hold) {
	ids := make([]int64, 0, len(hs))
	for _, h := range hs {
		if h != nil {
			ids = append(ids, h.id)
		}
	}
	if len(ids) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	_, _ = j.env.DB.Exec(ctx, "DELETE FROM lease_holds WHERE id = ANY ($1)", ids)
}
