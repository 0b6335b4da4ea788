package cli

import (
	"context"
	"errors"
	"io"
	"os"

	"github.com/locktop/locktop/internal/record/recording"
	"github.com/locktop/locktop/ui"
)

func init() {
	register(command{name: "replay", summary: "the dashboard on a recording, with a timeline (--at TIME --json: the snapshot then, as snapshot --json)",
		about: "TIME is a time of day (03:12:05), a date and time, an offset from the start (90s), or start or end;\n" +
			"times are in the local time zone. Keys: space plays and pauses, ←/→ step, t seeks, >/< change the speed.",
		run: runReplay})
}

// stepAt is the step --at names, "" being dflt.
func stepAt(r *recording.Recording, flag, at, dflt string) (int, error) {
	if at == "" {
		at = dflt
	}
	i, err := r.Seek(at, 0)
	if err != nil {
		return 0, usagef("%s: %v", flag, err)
	}
	return i, nil
}

func runReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("replay")
	fs.args = "FILE|DIR|URL"
	at := fs.String("at", "", "open at this `TIME` (default: the start)")
	asJSON := fs.Bool("json", false, "print the snapshot at --at as snapshot --json prints it, and exit")
	advisory := fs.Bool("advisory", false, "with --json: the advisory-locks document, as snapshot --json --advisory")
	r, err := parseRecording(ctx, fs, args, stderr)
	if err != nil {
		return err
	}
	defer r.Close()
	if *asJSON {
		if *at == "" {
			return usagef("replay --json needs --at TIME: the moment to print")
		}
		t, err := recording.ParseAt(*at, r.Time(0), r.Time(r.Len()-1), r.Time(0))
		if err != nil {
			return usagef("--at: %v", err)
		}
		i := r.Index(t)
		if i < 0 {
			return usagef("--at %s: the recording starts at %s", *at, r.Time(0).Format("2006-01-02 15:04:05"))
		}
		snap, err := r.Merged(i)
		if err != nil {
			return err
		}
		return printJSON(stdout, snapshotDocument(snap, r.Info(), *advisory))
	}
	i, err := stepAt(r, "--at", *at, "start")
	if err != nil {
		return err
	}
	if !isTerminal(os.Stdin) || !isTerminal(os.Stdout) {
		return exitError{code: exitUsage, err: errors.New(`the replay needs a terminal (stdin and stdout); without one use "locktop replay FILE --at TIME --json" or "locktop report FILE"`)}
	}
	return ui.Run(ctx, ui.Options{Replay: r, ReplayAt: i, Server: r.Header.Server, Interval: r.Header.Interval})
}
