package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/locktop/locktop/internal/record/htmlreport"
	"github.com/locktop/locktop/internal/record/incident"
	"github.com/locktop/locktop/internal/record/recording"
	"github.com/locktop/locktop/ui"
)

func init() {
	register(command{name: "report", summary: "an incident review of a recording: waits, blockers, the queue over time, lease expiries (--json, or --html: a page with the lock timeline)",
		run: runReport})
}

func runReport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("report")
	fs.args = "FILE|DIR|URL"
	from := fs.String("from", "", "review from this `TIME` on (default: the start)")
	to := fs.String("to", "", "review up to this `TIME` (default: the end)")
	asJSON := fs.Bool("json", false, "print the review as JSON")
	html := fs.String("html", "", "write the review as one self-contained HTML page with the lock timeline to `OUT.html` (- for stdout)")
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
	if *asJSON && *html != "" {
		return usagef("--json and --html: choose one")
	}
	if *html != "" {
		return writeHTMLReport(r, f, t, *html, stdout)
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

// writeHTMLReport writes the review of r from from to to as the HTML
// page to path, or to stdout for "-".
func writeHTMLReport(r *recording.Recording, from, to time.Time, path string, stdout io.Writer) error {
	rep, tl, err := htmlreport.Review(r, r.Header.Server, from, to)
	if err != nil {
		return err
	}
	rep.Damaged = len(r.Damage)
	var b bytes.Buffer
	o := htmlreport.Options{Location: time.Local, Sources: r.Header.Sources, Recorded: r.Header.Locktop, Version: versionString()}
	if err := htmlreport.Write(&b, rep, tl, o); err != nil {
		return err
	}
	if path == "-" {
		_, err := stdout.Write(b.Bytes())
		return err
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("--html: %w", err)
	}
	return nil
}
