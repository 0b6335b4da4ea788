package cli

import (
	"context"
	"io"
	"time"

	"github.com/locktop/locktop/internal/record/incident"
	"github.com/locktop/locktop/internal/record/recording"
	"github.com/locktop/locktop/ui"
)

func init() {
	register(command{name: "report", summary: "an incident review of a recording: waits, blockers, the queue over time, lease expiries (--json)",
		run: runReport})
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
	defer r.Close()
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
