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
// the process's wake-ups. Bubble Tea v2 has no way to draw at once after a
// key, nor to change the rate while running, so the rate is what a key's
// echo waits at worst: 10 a second keeps it within 100 ms (issue 26: at
// 20, about 1.6× the context switches at rest, 3,500 against 2,100 in
// 25 s, and 2.0–2.9% of a core against 1.65–1.75%). 5 a second was 0.85×
// the CPU at rest beside pg_activity's load, and was not taken: a key's
// echo would wait up to 200 ms.
const fps = 10

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
