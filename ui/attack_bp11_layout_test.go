//go:build attack

package ui

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/colorprofile"

	"github.com/locktop/locktop/internal/source"
	"github.com/locktop/locktop/model"
)

// Attack tests (bp11) on the lock table's rows laid out once a refresh
// (693736b): View draws the layout Update's settle made. Whatever a
// message changes (a snapshot with the same rows but another field, rows
// ageing, a longer owner or key, a filter typed, the sort, the cursor, an
// overlay, help, the forest, another server, the colours, a resize below
// the minimum and back), the frame View draws must be the one a layout
// made afresh draws (the View before 693736b).

// mutate is a snapshot derived from base: taken later (the TIME column
// ages), with random changes to its fields and rows.
func mutate(rng *rand.Rand, base model.Snapshot, taken time.Time) model.Snapshot {
	s := base
	s.Taken = taken
	s.Locks = slices.Clone(base.Locks)
	for i := range s.Locks {
		l := &s.Locks[i]
		b := *l.Session()
		l.Backend = &b
		switch rng.IntN(12) {
		case 0:
			if l.Mode == model.ModeShare {
				l.Mode = model.ModeExclusive
			} else {
				l.Mode = model.ModeShare
			}
		case 1:
			b.ApplicationName = strings.Repeat("long.application.name.", 1+rng.IntN(3))
		case 2:
			if !l.Granted {
				l.BlockedBy = append(slices.Clone(l.BlockedBy), int32(5000+rng.IntN(3000)))
			}
		case 3:
			if !l.Granted {
				l.QueuePos += rng.IntN(3)
			}
		case 4:
			l.Namespace = strings.Repeat("NS", 1+rng.IntN(12))
		case 5:
			b.State, b.StateChange = "idle in transaction", taken.Add(-time.Duration(rng.IntN(100))*time.Second)
		case 6:
			l.PID += int32(100000 * (1 + rng.IntN(90)))
		case 7:
			b.User = strings.Repeat("u", 1+rng.IntN(20))
		}
	}
	if rng.IntN(4) == 0 && len(s.Locks) > 3 {
		// Drop a key's rows: the last group.
		s.Locks = s.Locks[:len(s.Locks)-1]
	}
	if rng.IntN(5) == 0 {
		// Another kind: KIND appears.
		s.Locks = append(s.Locks, model.Lock{Kind: model.KindRedis, Name: "locks:" + strings.Repeat("k", rng.IntN(30)), Owner: strings.Repeat("o", 1+rng.IntN(30)), Mode: "exclusive", Granted: true, HeldSince: taken.Add(-time.Minute)})
	}
	return s
}

var attackKeys = []string{"down", "down", "up", "pgdown", "pgup", "home", "end", "o", "enter", "esc", "?", "w", "D", "v", "space", "r", ">", "<", "/", "a", "g", "4", "backspace", "enter"}

// drive sends n random messages to h and after each compares View's frame
// with one laid out afresh.
func drive(t *testing.T, h *harness, seed uint64, n int, base func() model.Snapshot, extra func(rng *rand.Rand) tea.Msg) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 3))
	taken := t0
	for i := range n {
		var msg tea.Msg
		switch r := rng.IntN(20); {
		case r < 5:
			taken = taken.Add(time.Duration(1+rng.IntN(2)) * time.Second)
			msg = SnapshotMsg{Snapshot: mutate(rng, base(), taken)}
		case r == 5:
			taken = taken.Add(time.Second)
			s := base() // the same rows, aged
			s.Taken = taken
			msg = SnapshotMsg{Snapshot: s}
		case r == 6:
			sizes := [][2]int{{160, 50}, {120, 36}, {100, 30}, {80, 24}, {79, 24}, {200, 60}, {60, 20}, {90, 26}}
			sz := sizes[rng.IntN(len(sizes))]
			msg = tea.WindowSizeMsg{Width: sz[0], Height: sz[1]}
		case r == 7:
			msg = tea.ColorProfileMsg{Profile: []colorprofile.Profile{colorprofile.ASCII, colorprofile.TrueColor, colorprofile.NoTTY}[rng.IntN(3)]}
		case r == 8:
			msg = h.tick()
		case r == 9 && extra != nil:
			msg = extra(rng)
		default:
			msg = press(attackKeys[rng.IntN(len(attackKeys))])
		}
		h.send(msg)
		got := h.m.View().Content
		laid := h.m.table.laidOK
		h.m.table.laidOK = false
		fresh := h.m.render()
		h.m.table.laidOK = laid
		if got != fresh {
			t.Fatalf("seed %d, message %d (%T %v): the frame drawn differs from one laid out afresh:\n%s\nafresh:\n%s", seed, i, msg, msg, got, fresh)
		}
	}
}

func TestAttackLaidOutOnceOneServer(t *testing.T) {
	for seed := range uint64(8) {
		h := newHarness(t, Options{Interval: time.Second})
		h.start(160, 50)
		_ = h.m.View()
		drive(t, h, seed, 400, sample, nil)
	}
}

// Several sources: the merged table's SERVER column and a source's rows
// coming and going.
func TestAttackLaidOutOnceSources(t *testing.T) {
	for seed := range uint64(6) {
		empty := &fakeLockSource{name: "lease", results: []SnapshotMsg{{Snapshot: model.Snapshot{Taken: t0}}}}
		h := newHarness(t, Options{Interval: time.Second, Sources: []source.Source{empty}})
		h.start(160, 50)
		_ = h.m.View()
		other := func(rng *rand.Rand) tea.Msg {
			s := model.Snapshot{Taken: t0.Add(time.Duration(rng.IntN(100)) * time.Second)}
			for j := range rng.IntN(4) {
				s.Locks = append(s.Locks, model.Lock{Kind: model.KindLease, Name: "lease-" + strings.Repeat("x", j*7), Owner: strings.Repeat("w", 1+rng.IntN(25)), Mode: "exclusive", Granted: true, HeldSince: t0.Add(-time.Minute)})
			}
			return SnapshotMsg{Source: 1, Snapshot: s}
		}
		drive(t, h, seed, 400, sample, other)
	}
}

// With the simulator: its panel beside or under the table, the event log
// filling and growing, the panel's status changing, and an episode log of
// a server without a simulator the same way (the log under the table).
func TestAttackLaidOutOnceSimulator(t *testing.T) {
	for seed := range uint64(5) {
		hs := newHarness(t, Options{Interval: time.Second, Simulator: &fakeSim{status: simStatus()}})
		hs.start(160, 50)
		_ = hs.m.View()
		sec := t0
		extra := func(rng *rand.Rand) tea.Msg {
			if rng.IntN(2) == 0 {
				st := simStatus()
				st.Agents += rng.IntN(40)
				return simMsg{status: st}
			}
			sec = sec.Add(time.Second)
			evs := demoEvents(sec)
			return eventsMsg{events: evs[:1+rng.IntN(len(evs))]}
		}
		drive(t, hs, seed, 300, sample, extra)
	}
}

// Rewound onto the history and back to live, stepping through it, live
// answers arriving meanwhile.
func TestAttackLaidOutOnceRewind(t *testing.T) {
	for seed := range uint64(5) {
		hist := recorded()
		h := newHarness(t, Options{Interval: time.Second, History: func() (Replay, error) { return hist, nil }})
		h.start(160, 50)
		_ = h.m.View()
		extra := func(rng *rand.Rand) tea.Msg {
			return press([]string{"b", "L", "left", "right", "left", "b"}[rng.IntN(6)])
		}
		drive(t, h, seed, 300, sample, extra)
	}
}

// A recording replayed: stepping, seeking, the table's keys between.
func TestAttackLaidOutOnceReplay(t *testing.T) {
	for seed := range uint64(5) {
		h := newHarness(t, Options{Replay: recorded(), Server: "monitor@db.internal:5432/app"})
		h.start(160, 50)
		_ = h.m.View()
		extra := func(rng *rand.Rand) tea.Msg {
			return press([]string{"left", "right", "home", "end", "space"}[rng.IntN(5)])
		}
		drive(t, h, seed, 300, func() model.Snapshot { return recorded().snaps[seed%5] }, extra)
	}
}
