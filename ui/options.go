package ui

import (
	"context"
	"log/slog"
	"time"

	"github.com/locktop/locktop/model"
)

// Source is where lock snapshots come from; *monitor.Monitor satisfies it.
// Poll is called from a command, never from Update, and at most one poll
// runs at a time.
type Source interface {
	// Poll reads the lock table once. Its error is shown on screen and
	// logged as it is, so it must be one line and hold no password.
	Poll(ctx context.Context) (model.Snapshot, error)
	// Info describes the server; it must not do I/O.
	Info() model.ServerInfo
}

// Options are what the dashboard is given. Only Source is required.
type Options struct {
	// Source supplies the lock snapshots.
	Source Source
	// Simulator, when not nil, adds the simulator panel and its controls;
	// the gauges show the pools in its status.
	Simulator Simulator
	// Terminate, when not nil, enables the confirmed "terminate backend"
	// action (the --allow-terminate flag). The dashboard is read-only
	// without it.
	Terminate func(ctx context.Context, pid int32) error
	// Interval is the refresh interval; default DefaultInterval.
	Interval time.Duration
	// Mode names how locktop runs, for the header: "monitor", "embedded",
	// "monitor + sim".
	Mode string
	// Logger receives what happens (connection lost, actions taken); nil
	// discards it. The TUI owns the screen, so this should write to a file.
	Logger *slog.Logger
	// NoColor renders without colour; Run sets it from NO_COLOR.
	NoColor bool
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
