package cli

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/locktop/locktop/internal/serve/httpapi"
	"github.com/locktop/locktop/internal/source"
	"github.com/locktop/locktop/model"
)

// serve as a collector: with several targets, every source (each target's
// server and the sources beside it) is polled on a loop of its own, with
// a timeout of its own, on the one monitor connection its target keeps; the
// newest answer of each is merged and published once an interval. A
// target that hangs holds up its own loop only, one that is down fails
// fast and is retried at its next turn, and no poll ever waits for
// another.

// loopEach polls every source on its own loop until ctx ends, and
// publishes the merged newest answers every interval.
func (mo *monitoring) loopEach(ctx context.Context, interval, fast time.Duration) {
	all := append([]source.Source{source.Named(mo.pgName, mo.server)}, mo.others...)
	var wg sync.WaitGroup
	defer wg.Wait()
	for i, src := range all {
		wg.Go(func() { mo.pollLoop(ctx, i, src, interval, fast) })
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if s, err := mo.poll(ctx); err == nil {
			mo.latest.Put(s)
		}
	}
}

// pollLoop polls source i every interval (fast while any source has a
// waiter), each poll bounded by the interval or the source's own timeout,
// keeping its newest answer. A failure is logged when it begins and when
// it ends, not at every poll.
func (mo *monitoring) pollLoop(ctx context.Context, i int, src source.Source, interval, fast time.Duration) {
	timeout := max(interval, defaultSourceTimeout)
	failing := false
	for {
		begun := time.Now()
		pctx, cancel := context.WithTimeout(ctx, timeout)
		parts := source.PollAll(pctx, []source.Source{source.WithTimeout(src, timeout)})
		cancel()
		if ctx.Err() != nil {
			return
		}
		p := parts[0]
		mo.mu.Lock()
		mo.parts[i] = p
		_, w := p.Snapshot.Counts()
		mo.waiting[i] = p.Err == nil && w > 0
		if p.Err == nil {
			mo.answered[i] = time.Now()
		}
		waiting := slices.Contains(mo.waiting, true)
		mo.mu.Unlock()
		mo.countFailure(p.Name, p.Err)
		switch {
		case p.Err != nil && !failing:
			mo.log.Warn("source not answering; retrying every interval", "source", p.Name, "err", p.Err.Error())
			failing = true
		case p.Err == nil && failing:
			mo.log.Info("source answering again", "source", p.Name)
			failing = false
		}
		next := interval
		if waiting && fast > 0 && fast < interval {
			next = fast
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(max(next-time.Since(begun), 0)):
		}
	}
}

// fleetHealth is /healthz's check with several targets: healthy while any
// target's server answered its newest poll (each target's own state is in
// the body, targets). It does no I/O: the polls are the probes.
func (mo *monitoring) fleetHealth(ctx context.Context) error {
	for _, t := range mo.targets(0) {
		if t.Up {
			return nil
		}
	}
	return errors.New("no target's server answered its newest poll")
}

// targets says how each target's server answered its newest poll, and
// how old its newest answer is (fresh: within two intervals).
func (mo *monitoring) targets(interval time.Duration) []httpapi.TargetHealth {
	// Each target's server: its name, its error, when it last answered
	// (by this clock, not the server's).
	type answer struct {
		name string
		err  string
		at   time.Time
	}
	var answers []answer
	mo.mu.Lock()
	if mo.pollOthers {
		for i, p := range mo.parts {
			a := answer{name: p.Name, at: mo.answered[i]}
			if p.Err != nil {
				a.err = p.Err.Error()
			}
			answers = append(answers, a)
		}
	}
	mo.mu.Unlock()
	if !mo.pollOthers {
		// The dashboard's --http: its own polls, merged in latest.
		if s, ok := mo.latest.Newest(); ok {
			for _, st := range s.Sources {
				answers = append(answers, answer{name: st.Name, err: st.Err, at: st.Taken})
			}
		}
	}
	var out []httpapi.TargetHealth
	for _, a := range answers {
		server, src := model.SplitSource(a.name)
		if src != pgSource {
			continue
		}
		th := httpapi.TargetHealth{Name: server, Up: a.err == "", Error: a.err}
		if !a.at.IsZero() {
			age := max(time.Since(a.at), 0)
			th.Age = age.Seconds()
			th.Fresh = th.Up && (interval <= 0 || age <= 2*interval)
		}
		out = append(out, th)
	}
	return out
}
