package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/testenv/pgtest"
)

// Jobs: caps, fairness between projects, and the locks a job owns (the
// suite).

func testJobCaps(t *testing.T, e *env) {
	const global, perProject, maps = 3, 2, 1
	// A long lease: the caps are under test, not expiry. At load 17 the
	// SQLite writers queued the heartbeats past the default 5s.
	o := Options{MaxGlobalJobs: global, MaxJobsPerProject: perProject, MaxMapJobsPerProject: maps, Lease: 30 * time.Second}
	ms := []*Manager{e.open(o), e.open(o), e.open(o)} // three processes
	var mu sync.Mutex
	running, inProject, mapsIn := 0, map[string]int{}, map[string]int{}
	var over atomic.Int32
	var wg sync.WaitGroup
	for i := range 18 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			j := Job{ID: fmt.Sprintf("job%d", i), Project: fmt.Sprintf("p%d", i%3)}
			if i%2 == 0 {
				j.Map = fmt.Sprintf("m%d", i)
			}
			s, err := ms[i%3].StartJob(ctxT(t), j)
			if err != nil {
				t.Errorf("StartJob: %v", err)
				return
			}
			mu.Lock()
			running++
			inProject[j.Project]++
			if j.Map != "" {
				mapsIn[j.Project]++
			}
			if running > global || inProject[j.Project] > perProject || mapsIn[j.Project] > maps {
				over.Add(1)
			}
			mu.Unlock()
			time.Sleep(10 * time.Millisecond) // the job's work
			mu.Lock()
			running--
			inProject[j.Project]--
			if j.Map != "" {
				mapsIn[j.Project]--
			}
			mu.Unlock()
			if err := s.Finish(ctxT(t)); err != nil {
				t.Errorf("Done: %v", err)
			}
		}()
	}
	// Meanwhile, the database's own view never exceeds the caps either.
	stop := make(chan struct{})
	var watch sync.WaitGroup
	watch.Add(1)
	go func() {
		defer watch.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			jobs, err := ms[0].Jobs(ctxT(t))
			if err != nil {
				t.Error(err)
				return
			}
			n, per := 0, map[string]int{}
			for _, j := range jobs {
				if j.Running {
					n++
					per[j.Project]++
				}
			}
			for _, c := range per {
				if c > perProject {
					over.Add(1)
				}
			}
			if n > global {
				over.Add(1)
			}
		}
	}()
	wg.Wait()
	close(stop)
	watch.Wait()
	if n := over.Load(); n > 0 {
		t.Errorf("caps exceeded %d times", n)
	}
	if jobs, _ := ms[0].Jobs(ctxT(t)); len(jobs) != 0 {
		t.Errorf("jobs left: %+v", jobs)
	}
}

func testJobFairness(t *testing.T, e *env) {
	// Eleven queued jobs share one SQLite writer with their scheduling
	// passes; on a loaded box the heartbeat has waited out a 5s lease
	// behind them, losing every queued job. Leases are not what this case
	// tests: a long one keeps them out of the way.
	o := Options{MaxGlobalJobs: 1, Lease: 30 * time.Second}
	m := e.open(o)
	other := e.open(o) // the small project's process
	first, err := m.StartJob(ctxT(t), Job{ID: "big-0", Project: "big"})
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan string, 20)
	var wg sync.WaitGroup
	queue := func(mgr *Manager, id, project string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := mgr.StartJob(ctxT(t), Job{ID: id, Project: project})
			if err != nil {
				t.Errorf("StartJob %s: %v", id, err)
				return
			}
			started <- id
			_ = s.Finish(ctxT(t))
		}()
	}
	queued := func(n int) func() bool {
		return func() bool {
			jobs, err := m.Jobs(ctxT(t))
			if err != nil {
				t.Fatal(err)
			}
			q := 0
			for _, j := range jobs {
				if !j.Running {
					q++
				}
			}
			return q == n
		}
	}
	for i := 1; i <= 10; i++ {
		queue(m, fmt.Sprintf("big-%d", i), "big")
	}
	pgtest.Eventually(t, "ten big jobs queued", queued(10))
	queue(other, "small-1", "small")
	pgtest.Eventually(t, "the small job queued", queued(11))
	if err := first.Finish(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	// Every StartJob may fail (and say so): then none starts, and the test
	// must end rather than wait for good.
	ended := make(chan struct{})
	go func() { wg.Wait(); close(ended) }()
	var got string
	select {
	case got = <-started:
	case <-ended:
		select {
		case got = <-started: // it started, then all ended
		default:
			t.Fatal("no queued job started")
		}
	}
	if got != "small-1" {
		t.Errorf("after the running big job, %s started; want the small project's job first", got)
	}
	<-ended
}

func testJobOwnsLocks(t *testing.T, e *env) {
	m := e.open(Options{})
	s, err := m.StartJob(ctxT(t), Job{ID: "j1", Project: "p", Kind: "import"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.StartJob(ctxT(t), Job{ID: "j1", Project: "p"}); !errors.Is(err, ErrJobExists) {
		t.Errorf("a second live job j1: %v", err)
	}
	p := acquire(t, s.Context(), m, Project("p"), Read)
	mp := acquire(t, p.Context(), m, Map("m"), Write)
	infos, _ := m.Locks(ctxT(t))
	for _, i := range infos {
		if i.Owner != "job:j1" {
			t.Errorf("listed owner %q, want the job", i.Owner)
		}
	}
	jobs, _ := m.Jobs(ctxT(t))
	if len(jobs) != 1 || !jobs[0].Running || jobs[0].Kind != "import" || jobs[0].Owner != "job:j1" {
		t.Errorf("jobs: %+v", jobs)
	}
	if err := s.Finish(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if p.Err() == nil || mp.Err() == nil {
		t.Error("Done left the job's locks held")
	}
	if infos, _ := m.Locks(ctxT(t)); len(infos) != 0 {
		t.Errorf("left after Finish: %+v", infos)
	}
	if !errors.Is(context.Cause(s.Context()), ErrReleased) {
		t.Errorf("job context after Finish: %v", context.Cause(s.Context()))
	}
}
