package ui

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/locktop/locktop/model"
)

// + and - say how many rates they changed, and that there was nothing to
// change when every rate is without a limit.
func TestRatesKeysSayWhatChanged(t *testing.T) {
	st := simStatus()
	st.Rates = []model.Rate{{Name: "hooks/s", Value: 0}, {Name: "reaper/s", Value: 2}}
	sim := &fakeSim{status: st}
	h := newHarness(t, Options{Simulator: sim})
	h.start(100, 30)
	h.keys("+")
	if h.m.footer.isErr || h.m.footer.status != "rates ×1.25 (1 rate)" {
		t.Errorf("status %q (error %v)", h.m.footer.status, h.m.footer.isErr)
	}
	if !strings.Contains(ansi.Strip(h.view()), "hooks/s max") {
		t.Error("a rate without a limit is not shown as max")
	}
	sim.mu.Lock()
	sim.status.Rates = sim.status.Rates[:1]
	sim.mu.Unlock()
	h.keys("-")
	if !h.m.footer.isErr || !strings.Contains(h.m.footer.status, "no rate to scale") {
		t.Errorf("status %q (error %v)", h.m.footer.status, h.m.footer.isErr)
	}
}

func TestWaitEventsBatchesAndEnds(t *testing.T) {
	ch := make(chan model.Event, 10)
	for range 3 {
		ch <- model.Event{Worker: "hook"}
	}
	close(ch)
	msg := waitEvents(context.Background(), ch)().(eventsMsg)
	if len(msg.events) != 3 || !msg.closed {
		t.Fatalf("got %d events, closed %v", len(msg.events), msg.closed)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if msg := waitEvents(ctx, make(chan model.Event))(); msg != nil {
		t.Fatalf("a cancelled wait returned %v", msg)
	}
	// A stream that ended is not waited on again.
	sim := &fakeSim{status: simStatus(), events: make(chan model.Event)}
	h := newHarness(t, Options{Simulator: sim})
	if cmd := h.send(eventsMsg{closed: true}); cmd != nil {
		t.Error("waiting again on a closed stream")
	}
}

func TestDiffEvents(t *testing.T) {
	prev := sample()
	next := sample()
	next.Taken = t0.Add(time.Second)
	// 4250 was granted AGENT 7 after 4242 let go; 4603 left the queue; a new waiter came.
	next.Locks = slices.DeleteFunc(next.Locks, func(l model.Lock) bool {
		return l.PID == 4242 || (l.PID == 4250) || l.PID == 4603
	})
	granted := held(lock("AGENT", 7, 4250, "hook.stop", true), 0)
	next.Locks = append(next.Locks, granted, waiting(lock("AGENT", 11, 4700, "hook.new", false), 1, 0, 4800))
	got := map[string]model.Event{}
	for _, e := range diffEvents(&prev, &next) {
		got[string(e.Outcome)+" "+e.Key+" "+itoa(int64(e.PID))] = e
	}
	for _, k := range []string{"released AGENT 7 4242", "granted AGENT 7 4250", "left 5 -3 4603", "waits AGENT 11 4700"} {
		if _, ok := got[k]; !ok {
			t.Errorf("missing %q in %v", k, got)
		}
	}
	if len(got) != 4 {
		t.Errorf("%d events, want 4: %v", len(got), got)
	}
	if e := got["granted AGENT 7 4250"]; e.Wait != 7*time.Second {
		t.Errorf("granted after %v, want 7s (6s waited + 1s)", e.Wait)
	}
	// A hot key with a long queue: the holder goes, the first waiter gets it.
	var hot, hot2 model.Snapshot
	hot.Locks = append(hot.Locks, held(lock("AGENT", 1, 100, "x", true), time.Second))
	for i := range 200 {
		hot.Locks = append(hot.Locks, waiting(lock("AGENT", 1, int32(200+i), "x", false), i+1, time.Second, 100))
	}
	hot2.Locks = append(hot2.Locks, held(lock("AGENT", 1, 200, "x", true), 0))
	hot2.Locks = append(hot2.Locks, hot.Locks[2:]...)
	evs := diffEvents(&hot, &hot2)
	if len(evs) != 2 || evs[0].Outcome != outcomeGranted || evs[0].PID != 200 || evs[1].Outcome != outcomeReleased || evs[1].PID != 100 {
		t.Errorf("hot key: %+v", evs)
	}

	// Redis keys (entity id 0 all) that keep their place up to a change
	// in the middle: only the changed rows make events.
	redis := func(name, owner string, granted bool) model.Lock {
		l := model.Lock{Kind: model.KindRedis, Name: name, Owner: owner, Mode: "exclusive", Granted: granted}
		if !granted {
			l.QueuePos, l.BlockedByOwners = 1, []string{"o-" + name}
		}
		return l
	}
	var rs, rs2 model.Snapshot
	for i := range 50 {
		k := "k" + itoa(int64(i))
		rs.Locks = append(rs.Locks, redis(k, "o-"+k, true))
		rs2.Locks = append(rs2.Locks, redis(k, "o-"+k, true))
		if i == 25 {
			rs2.Locks[len(rs2.Locks)-1].Owner = "someone"
		}
		if i == 40 {
			rs2.Locks = append(rs2.Locks, redis(k, "w", false))
		}
	}
	got = map[string]model.Event{}
	for _, e := range diffEvents(&rs, &rs2) {
		got[string(e.Outcome)+" "+e.Key+" "+e.Worker] = e
	}
	if len(got) != 3 || got["acquired k25 someone"].Key == "" || got["released k25 o-k25"].Key == "" || got["waits k40 w"].Key == "" {
		t.Errorf("Redis keys: %v", got)
	}

	// A flood is capped with a summary line.
	var big model.Snapshot
	for i := range 100 {
		big.Locks = append(big.Locks, held(lock("AGENT", int64(i), int32(5000+i), "x", true), 0))
	}
	evs = diffEvents(&model.Snapshot{}, &big)
	if len(evs) != maxDiffEvents+1 || !strings.Contains(evs[maxDiffEvents].Detail, "80 more") {
		t.Errorf("%d events, last %+v", len(evs), evs[len(evs)-1])
	}
}
