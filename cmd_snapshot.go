package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/locktop/locktop/internal/httpapi"
	"github.com/locktop/locktop/internal/termsafe"
	"github.com/locktop/locktop/ui"
)

func init() {
	register(command{name: "snapshot", summary: "print the advisory locks once (--json: the /api/advisory-locks document) and exit", run: runSnapshot})
}

func runSnapshot(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("snapshot")
	conn := addConnFlags(fs)
	asJSON := fs.Bool("json", false, "print the JSON document GET /api/advisory-locks serves")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	dsn, given := conn.resolve()
	if !given {
		return usagef("snapshot needs a database: give a connection string or -h/-p/-U/-d, or set DATABASE_URL or the PG* variables")
	}
	mon, err := openMonitor(ctx, dsn)
	if err != nil {
		return err
	}
	defer mon.Close()
	snap, err := mon.Poll(ctx)
	if err != nil {
		return err
	}
	info := mon.Info()
	if info.Warning != "" {
		fmt.Fprintln(stderr, "locktop: warning:", info.Warning)
	}
	doc := httpapi.NewDocument(snap, info)
	if *asJSON {
		b, err := json.MarshalIndent(doc, "", "  ")
		if err != nil {
			return err
		}
		// As the table sanitizes, the JSON escapes what a terminal would
		// act on (C1 controls, bidi overrides): it is printed too.
		_, err = stdout.Write(append(termsafe.EscapeJSON(b), '\n'))
		return err
	}
	return writeTable(stdout, doc)
}

// writeTable prints the document for people: one line per holder or waiter.
func writeTable(w io.Writer, doc httpapi.Document) error {
	fmt.Fprintf(w, "%d advisory lock rows (%d held, %d waiting) at %s\n",
		doc.Total, doc.Held, doc.Waiting, doc.Taken.Local().Format(time.DateTime))
	if doc.Total == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	// PID is the row's own backend, holding or waiting; the holders a
	// waiter waits for are BLOCKED BY. (A lease lock has no backend: its
	// owner stands in the PID column.)
	fmt.Fprintln(tw, "\nKEY\tDATABASE\tPID\tSTATE\tMODE\tWAITED\tBLOCKED BY\tAPPLICATION\tQUERY")
	for _, l := range doc.Locks {
		state := "holds"
		if !l.Granted {
			state = "waits #" + strconv.Itoa(l.QueuePosition)
		}
		waited := ""
		if !l.Granted {
			waited = (time.Duration(l.Waited * float64(time.Second))).Round(time.Millisecond).String()
		}
		blocked := make([]string, len(l.BlockedBy))
		for i, p := range l.BlockedBy {
			blocked[i] = strconv.Itoa(int(p))
		}
		// Server strings go through the dashboard's sanitizer: a query or
		// name with a newline or an escape sequence must not reach the
		// terminal as one.
		who := ""
		if l.PID != nil {
			who = strconv.Itoa(int(*l.PID))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", ui.Sanitize(l.Key), ui.Sanitize(l.Database), ui.Sanitize(who), state,
			ui.Sanitize(strings.TrimSuffix(l.Mode, "Lock")), waited, strings.Join(blocked, ","), ui.Sanitize(l.ApplicationName), clip(ui.Sanitize(l.Query), 60))
	}
	return tw.Flush()
}

// clip shortens s to n runes, marking the cut.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
