// Package ui is locktop's Bubble Tea dashboard. It never runs SQL: lock
// snapshots, pool statistics and simulator events arrive as messages, and
// the simulator is driven through the Simulator interface.
//
// # Structure
//
// Model is the root model. It owns the polling loop and composes one
// component per part of the screen, each with SetSize and View: the header
// (header.go), the gauges (gauges.go), the lock table (locktable.go), the
// simulator panel (simpanel.go), the event log (eventlog.go), the footer
// (the short help of KeyMap, and a status line), and the overlays: the full
// help (bubbles/help over KeyMap), the lock details, the filter editor, the
// confirm dialog and the scenario and fault chooser. Every key is in KeyMap
// (keys.go); every style in Styles (styles.go).
//
// # Data flow
//
// The loop is a re-armed tea.Tick: a tick starts a poll (Source.Poll, in a
// command), the poll's SnapshotMsg arms the next tick. Exactly one tick or
// one poll is outstanding, so pausing stops the loop outright (an idle
// dashboard costs nothing) and changing the interval never starts a second
// loop. A failed poll shows a banner over the last good snapshot and the
// next attempt comes after a backoff of 1, 2, 4 … 30 seconds.
//
// With a simulator, its status and the pools are read beside each poll, and
// its events are taken in batches (at most one redraw per 100 ms for them).
// Without one, the event log tells what changed between snapshots.
//
// # Cost
//
// Only the rows that fit are rendered; grouping, filtering and sorting are
// linear in the lock count. At 10,000 locks a refresh (Update and View)
// takes a couple of milliseconds (BenchmarkSnapshot10k).
package ui
