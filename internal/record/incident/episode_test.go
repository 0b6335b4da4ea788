package incident

import (
	"errors"
	"testing"
	"time"

	"github.com/locktop/locktop/model"
)

// frames is a recording in memory, one merged snapshot a step.
type frames []model.Snapshot

func (f frames) Len() int                             { return len(f) }
func (f frames) Time(i int) time.Time                 { return f[i].Taken }
func (f frames) Merged(i int) (model.Snapshot, error) { return f[i], nil }

func hold(pid int32, id int64, since time.Time) model.Lock {
	return model.Lock{Kind: model.KindAdvisory, PID: pid, Granted: true, Mode: model.ModeExclusive, Namespace: "AGENT", EntityID: id, Pair: true, HeldSince: since, Backend: &model.Backend{ApplicationName: "app"}}
}

func wait(pid int32, id int64, since time.Time, behind ...int32) model.Lock {
	return model.Lock{Kind: model.KindAdvisory, PID: pid, Mode: model.ModeExclusive, Namespace: "AGENT", EntityID: id, Pair: true, WaitStart: since, BlockedBy: behind, QueuePos: 1}
}

// A chain of waits is one episode whose root is the head of the chain:
// 3 waits for 2 on AGENT 2, 2 waits for 1 on AGENT 1. A wait on another
// key with no link to them is an episode of its own, and a source's errors
// are an outage.
func TestEpisodesFollowChains(t *testing.T) {
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	var f frames
	for s := range 12 {
		snap := model.Snapshot{Taken: at(s), Sources: []model.SourceStatus{{Name: "postgres", Taken: at(s)}, {Name: "redis", Taken: at(s)}}}
		if s >= 1 && s < 6 {
			snap.Locks = append(snap.Locks, hold(1, 1, at(-60)), hold(2, 2, at(-5)), wait(2, 1, at(1), 1))
			if s >= 2 {
				snap.Locks = append(snap.Locks, wait(3, 2, at(2), 2))
			}
		}
		if s >= 8 && s < 10 {
			snap.Locks = append(snap.Locks, hold(7, 9, at(7)), wait(8, 9, at(8), 7))
		}
		if s >= 3 && s < 5 {
			snap.Sources[1].Err = "connection refused"
		}
		f = append(f, snap)
	}
	r, err := Build(f, "", time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Episodes) != 2 {
		t.Fatalf("%d episodes, want 2: %+v", len(r.Episodes), r.Episodes)
	}
	e := r.Episodes[0]
	if !e.Start.Equal(at(1)) || !e.End.Equal(at(6)) || len(e.Keys) != 2 || e.PeakQueue != 2 || e.Waits != 2 {
		t.Fatalf("the chain: %+v", e)
	}
	if len(e.Roots) != 1 || e.Roots[0].Holder != "1" || time.Duration(e.Roots[0].Held) != 65*time.Second {
		t.Fatalf("the chain's roots: %+v; want 1 alone, held 65s", e.Roots)
	}
	if e2 := r.Episodes[1]; e2.Keys[0] != "AGENT 9" || len(e2.Roots) != 1 || e2.Roots[0].Holder != "7" || !e2.End.Equal(at(10)) {
		t.Fatalf("the second episode: %+v", e2)
	}
	if len(r.Outages) != 1 || r.Outages[0].Source != "redis" || !r.Outages[0].From.Equal(at(3)) || !r.Outages[0].To.Equal(at(5)) {
		t.Fatalf("outages: %+v", r.Outages)
	}
	if r.Holders[0].Holder != "1" || r.Holders[1].Holder != "2" {
		t.Fatalf("holders by time waited on: %+v", r.Holders)
	}
}

// A failed poll recorded in the middle of an episode ends neither the
// episode nor its waits: it is an outage. The wait ends with its holder
// (at 6s both are gone): granted.
func TestFailedPollIsAnOutage(t *testing.T) {
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	var f frames
	for s := range 8 {
		snap := model.Snapshot{Taken: at(s)}
		if s >= 1 && s < 6 {
			snap.Locks = []model.Lock{hold(1, 1, at(-10)), wait(2, 1, at(1), 1)}
		}
		if s == 3 {
			snap = model.Outage("postgres", errors.New("connection refused"), at(s))
		}
		f = append(f, snap)
	}
	r, err := Build(f, "", time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Episodes) != 1 || !r.Episodes[0].End.Equal(at(6)) || len(r.Waits) != 1 || r.Waits[0].Outcome != "granted" {
		t.Fatalf("episodes %+v, waits %+v: want one episode to 6s and one wait", r.Episodes, r.Waits)
	}
	if len(r.Outages) != 1 || !r.Outages[0].From.Equal(at(3)) || !r.Outages[0].To.Equal(at(4)) || r.Outages[0].Error != "connection refused" {
		t.Fatalf("outages %+v", r.Outages)
	}
}

// Episodes, fed one snapshot at a time (the live event log), tells when an
// episode begins and when it ends, with its root and peak, and keeps
// nothing of it afterwards.
func TestEpisodesLive(t *testing.T) {
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	x := NewEpisodes()
	var began, ended []Episode
	for s := range 8 {
		snap := model.Snapshot{Taken: at(s)}
		if s >= 2 && s < 6 {
			snap.Locks = []model.Lock{hold(1, 1, at(-10)), wait(2, 1, at(2), 1)}
			if s >= 3 {
				snap.Locks = append(snap.Locks, wait(3, 1, at(3), 1))
			}
		}
		b, e := x.Add(snap, at(s))
		if len(b) > 0 && s != 2 || len(e) > 0 && s != 6 {
			t.Fatalf("at %ds: began %+v, ended %+v", s, b, e)
		}
		began, ended = append(began, b...), append(ended, e...)
	}
	if len(began) != 1 || len(began[0].Roots) != 1 || began[0].Roots[0].Holder != "1" {
		t.Fatalf("began: %+v", began)
	}
	if len(ended) != 1 || !ended[0].End.Equal(at(6)) || ended[0].PeakQueue != 2 || ended[0].Waits != 2 {
		t.Fatalf("ended: %+v", ended)
	}
	if len(x.open)+len(x.waits)+len(x.holds)+len(x.holdWaiters) != 0 {
		t.Fatalf("the tracker keeps %d open, %d waits, %d holds after the episode", len(x.open), len(x.waits), len(x.holds))
	}
}

// counted counts how often each frame is read.
type counted struct {
	frames
	reads map[int]int
}

func (c *counted) Merged(i int) (model.Snapshot, error) { c.reads[i]++; return c.frames.Merged(i) }

// A report reads each frame of its span once: decoding a recorded
// snapshot is most of what a report costs.
func TestBuildReadsEachFrameOnce(t *testing.T) {
	f := &counted{reads: map[int]int{}}
	for s := range 6 {
		at := t0.Add(time.Duration(s) * time.Second)
		f.frames = append(f.frames, model.Snapshot{Taken: at, Locks: []model.Lock{hold(1, 1, t0), wait(2, 1, at, 1)}})
	}
	if _, err := Build(f, "", t0.Add(time.Second), t0.Add(4*time.Second)); err != nil {
		t.Fatal(err)
	}
	for i := range f.frames {
		if want := map[bool]int{true: 1}[i >= 1 && i <= 4]; f.reads[i] != want {
			t.Fatalf("frame %d read %d times, want %d (reads: %v)", i, f.reads[i], want, f.reads)
		}
	}
}

// Two episodes that a new wait links become one; when their queues part
// again, both go on continuing it: it ends once, when the last wait ends.
func TestEpisodesJoinAndPart(t *testing.T) {
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	x := NewEpisodes()
	var ended []Episode
	for s := range 8 {
		var locks []model.Lock
		switch {
		case s == 1: // two queues: AGENT 1 (1 holds, 2 waits), AGENT 2 (3 holds, 4 waits)
			locks = []model.Lock{hold(1, 1, at(0)), wait(2, 1, at(1), 1), hold(3, 2, at(0)), wait(4, 2, at(1), 3)}
		case s == 2 || s == 3: // 1 now waits for AGENT 2 too: one component
			locks = []model.Lock{hold(1, 1, at(0)), wait(2, 1, at(1), 1), hold(3, 2, at(0)), wait(4, 2, at(1), 3), wait(1, 2, at(2), 3)}
		case s == 4 || s == 5: // apart again, each queue still waiting
			locks = []model.Lock{hold(1, 1, at(0)), wait(2, 1, at(1), 1), hold(3, 2, at(0)), wait(4, 2, at(1), 3)}
		}
		b, e := x.Add(model.Snapshot{Taken: at(s), Locks: locks}, at(s))
		if s == 1 && len(b) != 2 || s != 1 && len(b) != 0 {
			t.Fatalf("at %ds: began %+v", s, b)
		}
		ended = append(ended, e...)
	}
	if len(ended) != 1 || len(ended[0].Keys) != 2 || !ended[0].Start.Equal(at(1)) || !ended[0].End.Equal(at(6)) || ended[0].PeakQueue != 3 || len(ended[0].Roots) != 2 {
		t.Fatalf("ended %+v; want one episode of both keys from 1s to 6s, 3 waiting at its peak, two roots", ended)
	}
}
