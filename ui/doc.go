// Package ui is locktop's Bubble Tea dashboard. It never runs SQL or Redis
// commands: lock snapshots, pool statistics and simulator events arrive as
// messages from commands, and the simulator is driven through the
// Simulator interface.
//
// # Structure
//
// Model is the root model. It owns the refresh loop (poller, poller.go)
// and composes the components, each of which keeps one contract
// (component, component.go): SetSize, View, and a help.KeyMap of its keys
// from KeyMap (keys.go), which the footer and the help overlay render — no
// key hint on screen is a literal. The components are the header
// (header.go), which renders the poller's state and one banner per failing
// source; the gauges (gauges.go); the lock table (locktable.go, its columns
// in columns.go, per-kind presentation in kinds.go); the simulator panel
// (simpanel.go); the event log (eventlog.go); and the footer (footer.go).
//
// At most one overlay is open, in one field: the help (helpoverlay.go), the
// details of a lock (details.go), the wait-for forest (forest.go, on the
// graph of model/waitfor, which also marks the table's root blockers and
// orders their keys first), the filter's editor (filterinput.go), the
// confirmation and the pickers (dialogs.go). An overlay is a component that
// also handles messages while open (Update) and says where it is drawn
// (Place); q quits from every overlay except one that takes text. The main
// screen's keys are a table of bindings (actions.go). Layout (layout.go)
// goes by content: the table's columns get what their visible cells need
// (modes in short, names elided in the part they share, when narrow), the
// table its rows before the event log, and the simulator and the events
// sit beside the table only when both get their readable width; else they
// stack. It holds still (steady.go): more room is given at once, less only
// when the content has wanted it for a few seconds, and a resize lays out
// afresh. A key with alt, ctrl or meta is never its letter (keys.go).
//
// # Data flow
//
// Locks come from Options.Source (the server) and Options.Sources (more
// sources: a Redis, a lease table), each on its own loop: a re-armed
// tea.Tick, a poll in a command, the poll's SnapshotMsg (carrying which
// source answered) arming the next tick, due on a grid of the interval
// that all the loops share, so their ticks wake the process once. Exactly
// one tick or one poll is outstanding per source, so pausing stops every
// loop outright (an idle dashboard costs nothing) and changing the
// interval never starts a second one. A failed poll shows a banner for that source only, over its last
// good locks, and that source alone retries after 1, 2, 4 … 30 seconds; the
// others keep updating. Every source's locks share the one table.
//
// With a simulator, its status and the pools are read beside the server's
// poll, and its events are taken in batches (at most one redraw per 100 ms
// for them). Without one, the event log tells what changed between
// snapshots. The log aggregates repeats per kind and key per second and
// keeps rare events (timeouts, losses, violations) pinned for a minute.
//
// # Cost
//
// Only the rows that fit are rendered and measured; grouping, filtering
// and sorting are linear in the lock count, and compare keys field by
// field (model.Lock.SameKey) rather than building them. At 10,000 held
// locks a refresh's Update and View take 6–9 ms of CPU on these 2-core
// machines (internal/cli's BenchmarkDashboardRefresh10k/update+render; with 7,500
// of them waiting, most of it is following the contention episodes:
// BenchmarkSnapshot10k). The rows in view are laid out once a refresh:
// View draws the layout Update's settle made (BenchmarkRestBeside). Run
// hands Bubble Tea each frame without the blanks that pad its lines
// (screen), which its renderer would parse, at most 10 frames a second
// (fps in run.go).
package ui
