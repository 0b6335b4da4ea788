package ui

import (
	"context"
	"errors"
	"os"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/colorprofile"
)

// fps caps the redraws a second. A dashboard refreshed once a second needs
// few; each frame that changed nothing still costs a wake-up (and wakes the
// Go runtime's sysmon with it), so at rest the renderer's ticker is most of
// the process's wake-ups. Bubble Tea v2 (2.1.1) has no way to draw at once
// after a key, nor to change the rate while running (one time.Ticker at
// WithFPS, the only option), so the rate is what a key's echo waits: at 5
// a second, 100 ms on average and 200 ms at worst (50 and 100 ms at 10).
// Issue 26: at 20, about 1.6× the context switches at rest of 10; beside
// pg_activity's load (1,000 held and 20 waiting locks), 5 against 10 was
// 0.85× the CPU (9 windows side by side, median), the largest cut left
// to the dashboard.
const fps = 5

// Run shows the dashboard on the terminal until the operator quits or ctx
// ends (Ctrl-C, SIGTERM). Cancelling ctx also stops every command the
// dashboard started; Run returns once the terminal is restored. Quitting,
// an interrupt and a cancelled ctx all return nil.
func Run(ctx context.Context, opts Options) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	popts := []tea.ProgramOption{tea.WithContext(ctx), tea.WithFPS(fps)}
	// https://no-color.org: any non-empty value. colorprofile only takes
	// values strconv.ParseBool accepts, so say it ourselves.
	if os.Getenv("NO_COLOR") != "" {
		opts.NoColor = true
		popts = append(popts, tea.WithColorProfile(colorprofile.ASCII))
	}
	_, err := tea.NewProgram(&screen{m: New(ctx, opts)}, popts...).Run()
	if err == nil || errors.Is(err, tea.ErrInterrupted) || errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
