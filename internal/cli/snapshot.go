package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/locktop/locktop/internal/serve/httpapi"
	"github.com/locktop/locktop/model"
	"github.com/locktop/locktop/ui"
)

func init() {
	register(command{name: "snapshot", summary: "print every lock once, of every source (--json: the /api/locks document) and exit", run: runSnapshot})
}

func runSnapshot(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("snapshot")
	conn := addConnFlags(fs)
	tf := addTargetFlags(fs)
	asJSON := fs.Bool("json", false, "print the JSON document GET /api/locks serves (every kind, every source)")
	advisory := fs.Bool("advisory", false, "with --json: print the advisory-locks document instead, GET /api/advisory-locks (advisory locks only)")
	lf := addSourceFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *advisory && !*asJSON {
		return usagef("--advisory picks the --json document: add --json")
	}
	srcs, err := lf.config()
	if err != nil {
		return err
	}
	dsn, targets, err := tf.servers("snapshot", conn, srcs)
	if err != nil {
		return err
	}
	st, err := OpenStack(ctx, StackConfig{DSN: dsn, Sources: srcs, Targets: targets})
	if err != nil {
		return err
	}
	defer st.Close()
	parts := st.PollAll(ctx)
	if parts[0].Err == nil && st.Named(ctx) {
		// Relations of other databases are named in their own databases,
		// after the poll that met them: once more, to print their names.
		parts = st.PollAll(ctx)
	}
	if err := parts[0].Err; err != nil && targets == nil {
		return errors.Unwrap(err) // the monitor's own error: its exit code
	}
	for _, p := range parts { // of several targets, one that failed is a warning too
		if p.Err != nil {
			fmt.Fprintf(stderr, "locktop: warning: %s: %v\n", p.Name, p.Err)
		}
		for _, part := range p.Snapshot.Partial {
			fmt.Fprintf(stderr, "locktop: warning: %s: part missing: %s\n", p.Name, part)
		}
		if p.Snapshot.Truncated {
			fmt.Fprintf(stderr, "locktop: warning: %s: more locks than listed (a bound cut the listing)\n", p.Name)
		}
	}
	snap := model.Merge(parts)
	info := st.Info()
	if info.Warning != "" {
		fmt.Fprintln(stderr, "locktop: warning:", info.Warning)
	}
	if *asJSON {
		return printJSON(stdout, snapshotDocument(snap, info, *advisory))
	}
	return writeTable(stdout, httpapi.NewLocksDocument(snap, info))
}

// writeTable prints the document for people: one line per holder or waiter.
func writeTable(w io.Writer, doc httpapi.LocksDocument) error {
	fmt.Fprintf(w, "%d lock rows (%d held, %d waiting) at %s", doc.Total, doc.Held, doc.Waiting, doc.Taken.Local().Format(time.DateTime))
	for i, k := range doc.Kinds {
		sep := ": "
		if i > 0 {
			sep = ", "
		}
		fmt.Fprintf(w, "%s%s %d/%d", sep, k.Kind, k.Held, k.Waiting)
	}
	fmt.Fprintln(w)
	if doc.Total == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	// PID/OWNER is the row's own backend (or a Redis or lease owner),
	// holding or waiting; the holders a waiter waits for are BLOCKED BY.
	// SERVER leads when locktop watches several.
	servers := slices.ContainsFunc(doc.Locks, func(l httpapi.LockDoc) bool { return l.Server != "" })
	if servers {
		fmt.Fprint(tw, "\nSERVER\t")
	} else {
		fmt.Fprint(tw, "\n")
	}
	fmt.Fprintln(tw, "KIND\tKEY\tDATABASE\tPID/OWNER\tSTATE\tMODE\tTIME\tBLOCKED BY\tAPPLICATION\tQUERY")
	for _, l := range doc.Locks {
		if servers {
			fmt.Fprintf(tw, "%s\t", ui.Sanitize(l.Server))
		}
		state := "holds"
		if !l.Granted {
			state = "waits #" + strconv.Itoa(l.QueuePosition)
		}
		when := ""
		switch {
		case !l.Granted && l.Waited != nil:
			when = secs(*l.Waited)
		case l.Left != nil:
			when = "left " + secs(*l.Left)
		case l.Held != nil:
			when = "held ≥" + secs(*l.Held)
		}
		blocked := make([]string, 0, len(l.BlockedBy)+len(l.BlockedByOwners))
		for _, p := range l.BlockedBy {
			blocked = append(blocked, strconv.Itoa(int(p)))
		}
		blocked = append(blocked, l.BlockedByOwners...)
		// Server strings go through the dashboard's sanitizer: a query or
		// name with a newline or an escape sequence must not reach the
		// terminal as one.
		who := l.Owner
		if l.PID != nil {
			who = strconv.Itoa(int(*l.PID))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", l.Kind, ui.Sanitize(l.Key), ui.Sanitize(l.Database), ui.Sanitize(who), state,
			ui.Sanitize(strings.TrimSuffix(l.Mode, "Lock")), when, ui.Sanitize(strings.Join(blocked, ",")), ui.Sanitize(l.ApplicationName), clip(ui.Sanitize(l.Query), 60))
	}
	return tw.Flush()
}

// secs renders seconds as a duration to the millisecond.
func secs(v float64) string {
	return time.Duration(v * float64(time.Second)).Round(time.Millisecond).String()
}

// clip shortens s to n runes, marking the cut.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
