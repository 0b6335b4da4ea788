package cli

import (
	"context"
	"sync"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/locktop/locktop/internal/source/pgsource"
	"github.com/locktop/locktop/internal/testenv/benchcpu"
	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/model"
	"github.com/locktop/locktop/ui"
)

// BenchmarkDashboardRefresh10k is one refresh of the dashboard at 10,000
// held advisory locks and 20 queued waiters, as it happens on screen: the
// monitor's poll (one statement, decoding, held-time tracking), the
// snapshot through the dashboard's Update, and a full render at 160x50.
// The budget is 50 ms. "poll" is the first part alone, "update+render" the
// rest alone (two polled snapshots in turn, each a moment later, as a new
// poll of the same locks would be: no server, the client's CPU only).
func BenchmarkDashboardRefresh10k(b *testing.B) {
	ctx := context.Background()
	mon := monitor10k(b)
	b.Run("poll", func(b *testing.B) {
		defer benchcpu.PerOp(b)()
		for b.Loop() {
			if _, err := mon.Poll(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("update+render", func(b *testing.B) {
		var snaps [2]model.Snapshot
		for i := range snaps {
			s, err := mon.Poll(ctx)
			if err != nil {
				b.Fatal(err)
			}
			snaps[i] = s
		}
		m := ui.New(ctx, ui.Options{Source: mon})
		m.Update(tea.WindowSizeMsg{Width: 160, Height: 50})
		defer benchcpu.PerOp(b)() // the CPU it took: on a shared machine, steadier than the time
		i := 0
		for b.Loop() {
			i++
			s := snaps[i%2]
			s.Taken = s.Taken.Add(time.Duration(i) * time.Microsecond)
			m.Update(ui.SnapshotMsg{Snapshot: s})
			_ = m.View()
		}
	})
	b.Run("poll+update+render", func(b *testing.B) {
		m := ui.New(ctx, ui.Options{Source: mon})
		m.Update(tea.WindowSizeMsg{Width: 160, Height: 50})
		defer benchcpu.PerOp(b)()
		for b.Loop() {
			snap, err := mon.Poll(ctx)
			m.Update(ui.SnapshotMsg{Snapshot: snap, Err: err})
			_ = m.View()
		}
	})
}

// monitor10k holds 10,000 advisory locks and queues 20 waiters on the test
// server, for as long as b runs, and returns a Monitor that sees them all.
func monitor10k(b *testing.B) *pgsource.Monitor {
	ctx := context.Background()
	const held, waiters = 10000, 20
	holder := pgtest.Conn(b)
	if _, err := holder.Exec(ctx, "SELECT count(pg_advisory_lock(1, g)) FROM generate_series(1, $1) g", held); err != nil {
		b.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i := range waiters {
		c := pgtest.Conn(b)
		wg.Go(func() { _, _ = c.Exec(wctx, "SELECT pg_advisory_lock(1, $1)", int32(i+1)) })
	}
	b.Cleanup(func() { cancel(); wg.Wait() })

	mon, err := pgsource.Connect(ctx, pgtest.DSN(b), pgsource.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(mon.Close)
	deadline := time.Now().Add(60 * time.Second)
	for {
		snap, err := mon.Poll(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if h, w := snap.Counts(); h >= held && w >= waiters {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("the locks never all showed up")
		}
	}
	return mon
}
