package ui

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/locktop/locktop/internal/source"
	"github.com/locktop/locktop/model"
	"github.com/locktop/locktop/model/waitfor"
)

// Source is the server the dashboard watches; *pgsource.Monitor satisfies
// it. Poll is called from a command, never from Update, and at most one
// poll runs at a time.
type Source interface {
	// Poll reads the lock table once. Its error is shown on screen and
	// logged as it is, so it must be one line and hold no password.
	Poll(ctx context.Context) (model.Snapshot, error)
	// Info describes the server; it must not do I/O.
	Info() model.ServerInfo
}

// Options are what the dashboard is given. Only Source is required.
type Options struct {
	// Source supplies the lock snapshots of the server.
	Source Source
	// Sources are more places locks come from beside Source: a Redis
	// holding session mutexes, a table of leases. Each is polled on its
	// own loop at the dashboard's interval, with its own timeout and
	// backoff, never from Update and at most one poll of a source at a
	// time; its locks join the one table, and its failure shows a banner
	// of its own (under its Name) while the other sources keep updating.
	Sources []source.Source
	// Simulator, when not nil, adds the simulator panel and its controls;
	// the gauges show the pools in its status.
	Simulator Simulator
	// Terminate, when not nil, enables the confirmed "terminate backend"
	// action (the --allow-terminate flag). The dashboard is read-only
	// without it.
	Terminate func(ctx context.Context, pid int32) error
	// ForceRelease, when not nil beside Terminate, lets the deadlock
	// details break a cycle by force-releasing a Redis lock (its full key,
	// as model.Lock.Name) through the lock library's audited path.
	ForceRelease func(ctx context.Context, name string) error
	// Deadlocks, when not nil, is told each poll's new deadlocks (the
	// cycles the banner and the event announce, once each), so the
	// metrics count what the screen shows from the one graph of its
	// snapshot.
	Deadlocks func(fresh []waitfor.Cycle)
	// Interval is the refresh interval; default DefaultInterval.
	Interval time.Duration
	// Server names the watched server in the header, as pg_activity does:
	// "user@host:port/database", the host being the socket directory for a
	// Unix socket. Never a password. "" shows Source.Info's user@database.
	Server string
	// ThrowAway says the server is locktop's own throw-away PostgreSQL;
	// the header's mode says so.
	ThrowAway bool
	// Warnings are shown under the header for as long as the dashboard
	// runs: things the operator must not miss, such as --http listening
	// on an address other machines reach.
	Warnings []string
	// Logger receives what happens (connection lost, actions taken); nil
	// discards it. The TUI owns the screen, so this should write to a file.
	Logger *slog.Logger
	// NoColor renders without colour; Run sets it from NO_COLOR.
	NoColor bool
	// Replay, when not nil, plays a recording instead of polling: Source
	// and Sources are not used, and a timeline shows where the screen is
	// in it (locktop replay). ReplayAt is the step it opens at.
	Replay   Replay
	ReplayAt int
	// History, when not nil, is the past the live dashboard keeps: the
	// rewind key shows it on a timeline as replay does, while polling
	// goes on underneath. Each call returns a copy as of then.
	History func() (Replay, error)
	// FastInterval, when not zero, is the refresh interval while any lock
	// is waited for, so that short waits are seen; Interval at rest.
	FastInterval time.Duration
	// Targets name the servers watched, when there are several (--target
	// NAME=…): Source is the first's server, Sources the rest, each named
	// "NAME/source". With more than one, the table has a SERVER column and
	// a server:NAME filter, the header a line summing the targets up, and
	// a key shows one target at a time.
	Targets []string
}

// mode is the header's words for how locktop runs, derived from the
// options alone: what it watches, and what it may do there.
func (o *Options) mode() string {
	var parts []string
	switch {
	case o.Replay != nil:
		parts = append(parts, "REPLAY of a recording")
	case o.ThrowAway:
		parts = append(parts, "throw-away server")
	case o.Simulator != nil:
		parts = append(parts, "simulator attached")
	case o.Terminate == nil:
		parts = append(parts, "read-only")
	}
	if o.Terminate != nil {
		parts = append(parts, "terminate allowed")
	}
	return strings.Join(parts, " · ")
}

// DefaultInterval is the refresh interval when Options.Interval is zero.
const DefaultInterval = time.Second

// intervals are the steps "refresh faster/slower" moves through.
var intervals = []time.Duration{
	100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second,
}

// Minimum terminal size the dashboard lays itself out in.
const (
	MinWidth  = 80
	MinHeight = 24
)

// Wait-time thresholds: a wait is coloured as a warning from waitWarn and
// as critical from waitCrit (lockcore's default timeout is 15s).
const (
	waitWarn = time.Second
	waitCrit = 5 * time.Second
)
