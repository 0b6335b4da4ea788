package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/locktop/locktop/internal/record/incident"
	"github.com/locktop/locktop/internal/record/recording"
	"github.com/locktop/locktop/ui"
)

func init() {
	register(command{name: "replay", summary: "the dashboard on a recording, with a timeline (--at TIME --json: the snapshot then, as snapshot --json)",
		about: "TIME is a time of day (03:12:05), a date and time, an offset from the start (90s), or start or end;\n" +
			"times are in the local time zone. Keys: space plays and pauses, ←/→ step, t seeks, >/< change the speed.",
		run: runReplay})
	register(command{name: "report", summary: "an incident review of a recording: waits, blockers, the queue over time, lease expiries (--json)",
		run: runReport})
}

// openRecording opens the recording a command names, or says in one line
// why it cannot be read (exit code 2). Damaged records are skipped: a
// warning on stderr says how many.
func openRecording(ctx context.Context, path string, stderr io.Writer) (*recording.Recording, error) {
	r, err := readRecording(ctx, path, stderr)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, exitError{code: exitUsage, err: fmt.Errorf("%s: %w", path, err)}
	}
	if n := len(r.Damage); n > 0 {
		d := r.Damage[0]
		fmt.Fprintf(stderr, "locktop: warning: %s: %d damaged records skipped (the first at byte %d: %s)\n", path, n, d.Offset, d.Reason)
	}
	if r.Len() == 0 {
		return nil, exitError{code: exitUsage, err: fmt.Errorf("%s: the recording holds no snapshot", path)}
	}
	return r, nil
}

// parseRecording parses replay's or report's flags and opens the one FILE
// argument, the recording.
func parseRecording(ctx context.Context, fs *flagSet, args []string, stderr io.Writer) (*recording.Recording, error) {
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	switch a := fs.Args(); len(a) {
	case 0:
		return nil, fs.usageErr(errors.New("FILE is missing: the recording to read (a file, a --history directory, or a serve's http://HOST:PORT)"))
	case 1:
		return openRecording(ctx, a[0], stderr)
	default:
		return nil, fs.usageErr(fmt.Errorf("unexpected argument %q", a[1]))
	}
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
	advisory := fs.Bool("advisory", false, "with --json: seed 000's document, as snapshot --json --advisory")
	r, err := parseRecording(ctx, fs, args, stderr)
	if err != nil {
		return err
	}
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

func runReport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("report")
	fs.args = "FILE|DIR|URL"
	from := fs.String("from", "", "review from this `TIME` on (default: the start)")
	to := fs.String("to", "", "review up to this `TIME` (default: the end)")
	asJSON := fs.Bool("json", false, "print the review as JSON")
	r, err := parseRecording(ctx, fs, args, stderr)
	if err != nil {
		return err
	}
	first, last := r.Span()
	span := func(flag, text string, dflt time.Time) (time.Time, error) {
		if text == "" {
			return dflt, nil
		}
		t, err := recording.ParseAt(text, first, last, first)
		if err != nil {
			return t, usagef("%s: %v", flag, err)
		}
		return t, nil
	}
	f, err := span("--from", *from, first)
	if err != nil {
		return err
	}
	t, err := span("--to", *to, last)
	if err != nil {
		return err
	}
	if t.Before(f) {
		return usagef("--to %s is before --from %s", *to, *from)
	}
	rep, err := incident.Build(r, r.Header.Server, f, t)
	if err != nil {
		return err
	}
	rep.Damaged = len(r.Damage)
	if *asJSON {
		return printJSON(stdout, rep)
	}
	return rep.WriteText(stdout, incident.TextOptions{Clean: ui.Sanitize})
}
