package incident

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/locktop/locktop/model"
)

// TextOptions say how WriteText renders: the time zone of its times, and
// what cleans a string from the server before it reaches a terminal.
type TextOptions struct {
	Location *time.Location
	Clean    func(string) string
}

// WriteText writes the report for people.
func (r *Report) WriteText(w io.Writer, o TextOptions) error {
	loc, clean := o.Location, o.Clean
	if loc == nil {
		loc = time.Local
	}
	if clean == nil {
		clean = func(s string) string { return s }
	}
	clock := func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.In(loc).Format("15:04:05")
	}
	var b strings.Builder
	fmt.Fprintf(&b, "locktop report: %s\n%s – %s (%s, %d snapshots)",
		clean(r.Server), r.From.In(loc).Format("2006-01-02 15:04:05"), clock(r.To), Dur(r.To.Sub(r.From)), r.Snapshots)
	if r.Damaged > 0 {
		fmt.Fprintf(&b, "; %d damaged records skipped", r.Damaged)
	}
	b.WriteString("\n")

	section := func(title string, empty string, rows int, header string, each func(tw io.Writer)) {
		fmt.Fprintf(&b, "\n%s\n", title)
		if rows == 0 {
			fmt.Fprintf(&b, "  %s\n", empty)
			return
		}
		tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  "+header)
		each(tw)
		tw.Flush()
	}
	section("Contention episodes (first wait on connected keys to none waiting)", "none", len(r.Episodes),
		"FROM\tTO\tLASTED\tKEYS\tKINDS\tPEAK QUEUE\tWAITS\tWAITED\tROOT BLOCKERS (HELD)", func(tw io.Writer) {
			for _, e := range r.Episodes {
				to := clock(e.End)
				if e.Ongoing {
					to = "ongoing"
				}
				var roots []string
				for _, x := range e.Roots {
					root := fmt.Sprintf("%s %s ≥%s", clean(x.Holder), OrDash(clean(x.Application)), Dur(time.Duration(x.Held)))
					if x.Ended != "" {
						root += " " + Words(x.Ended, x.By)
					}
					roots = append(roots, root)
				}
				fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", clock(e.Start), to, Dur(time.Duration(e.Duration)),
					clean(listed(e.Keys, 3)), strings.Join(e.Kinds, ","), e.PeakQueue, e.Waits, Dur(time.Duration(e.Waited)), OrDash(strings.Join(roots, "; ")))
			}
		})
	section("Keys with the most total wait", "no waits", len(r.Keys),
		"KEY\tKIND\tWAITS\tTOTAL\tLONGEST\tMAX QUEUE\tFIRST\tLAST", func(tw io.Writer) {
			for _, k := range r.Keys {
				fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t%s\t%d\t%s\t%s\n", clean(k.Key), clean(k.Kind), k.Waits,
					Dur(time.Duration(k.Total)), Dur(time.Duration(k.Longest)), k.MaxQueue, clock(k.First), clock(k.Last))
			}
		})
	section("Longest single waits", "no waits", len(r.Waits),
		"KEY\tWAITER\tAPPLICATION\tWAITED\tFROM\tTO\tBEHIND\tENDED", func(tw io.Writer) {
			for _, x := range r.Waits {
				fmt.Fprintf(tw, "  %s\t%s\t%s\t≥%s\t%s\t%s\t%s\t%s\n", clean(x.Key), clean(x.Waiter), OrDash(clean(x.Application)),
					Dur(time.Duration(x.Waited)), clock(x.Start), clock(x.End), OrDash(clean(strings.Join(x.Behind, ","))), Words(x.Outcome, x.By))
			}
		})
	section("Holders that blocked the most waiters", "no holder had a waiter", len(r.Blockers),
		"KEY\tHOLDER\tAPPLICATION\tWAITERS\tBLOCKING\tMAX QUEUE\tFROM\tTO\tENDED", func(tw io.Writer) {
			for _, x := range r.Blockers {
				fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t≥%s\t%d\t%s\t%s\t%s\n", clean(x.Key), clean(x.Holder), OrDash(clean(x.Application)),
					x.Waiters, Dur(time.Duration(x.Blocking)), x.MaxQueue, clock(x.Start), clock(x.End), OrDash(Words(x.Outcome, x.By)))
			}
		})
	fmt.Fprintf(&b, "\nQueue length (waiting rows), %s – %s", clock(r.From), clock(r.To))
	if r.Queue.Peak > 0 {
		fmt.Fprintf(&b, ", peak %d at %s", r.Queue.Peak, clock(r.Queue.PeakAt))
	}
	if len(r.Queue.Samples) > 0 {
		fmt.Fprintf(&b, ", one column per %s", Dur(time.Duration(r.Queue.Bucket)))
	}
	if len(r.Queue.Gaps) > 0 {
		b.WriteString(" (· no data: the source was down)")
	}
	fmt.Fprintf(&b, "\n  │%s│\n", Sparkline(r.Queue.Samples, r.Queue.Gaps...))
	section("Leases: expiries, recoveries and losses", "none", len(r.Leases),
		"AT\tKEY\tKIND\tHOLDER\tEVENT\tBY\tHELD FROM", func(tw io.Writer) {
			for _, e := range r.Leases {
				fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\n", clock(e.At), clean(e.Key), clean(e.Kind), clean(e.Holder),
					e.Event, OrDash(clean(e.By)), clock(e.HeldFrom))
			}
		})
	section("Holders others waited on longest, in total", "no holder had a waiter", len(r.Holders),
		"HOLDER\tAPPLICATION\tKEYS\tWAITS\tWAITED ON IT", func(tw io.Writer) {
			for _, x := range r.Holders {
				fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%s\n", clean(x.Holder), OrDash(clean(x.Application)), clean(listed(x.Keys, 3)), x.Waits, Dur(time.Duration(x.Waited)))
			}
		})
	section("Longest holds (with or without waiters)", "no lock held", len(r.LongestHolds),
		"KEY\tKIND\tHOLDER\tAPPLICATION\tHELD\tFROM\tTO\tWAITERS\tENDED", func(tw io.Writer) {
			for _, x := range r.LongestHolds {
				fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t≥%s\t%s\t%s\t%d\t%s\n", clean(x.Key), clean(x.Kind), clean(x.Holder), OrDash(clean(x.Application)),
					Dur(time.Duration(x.Held)), clock(x.Since), clock(x.Until), x.Waiters, OrDash(Words(x.Outcome, x.By)))
			}
		})
	section("Deadlocks (cycles of waits seen in two snapshots in a row)", "none", len(r.Deadlocks),
		"FOUND\tLAST\tKINDS\tWAITS\tBROKEN BY", func(tw io.Writer) {
			for _, d := range r.Deadlocks {
				var waits []string
				for _, x := range d.Waits {
					waits = append(waits, clean(x.Waiter)+" → "+clean(x.Holder)+" on "+clean(x.Kind)+" "+clean(x.Key))
				}
				by := "nobody: each waits out its timeout"
				if d.ServerResolves {
					by = "the server (deadlock_timeout)"
				}
				fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", clock(d.Found), clock(d.Last), clean(d.Kinds), strings.Join(waits, "; "), by)
			}
		})
	section("Sources' outages", "none", len(r.Outages),
		"SOURCE\tFROM\tTO\tERROR", func(tw io.Writer) {
			for _, o := range r.Outages {
				to := clock(o.To)
				if o.Ongoing {
					to = "ongoing"
				}
				fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", clean(o.Source), clock(o.From), to, clean(o.Error))
			}
		})
	_, err := io.WriteString(w, b.String())
	return err
}

// Words says how a wait or hold ended (an Outcome and its By), for
// people: "terminated by locktop", "session ended", "released".
func Words(o, by string) string {
	if o == model.EndTerminated || o == model.EndEnded {
		return model.SessionEnd{Cause: o, By: by}.Words()
	}
	return o
}

// listed is the first n of items, and how many more.
func listed(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s +%d", strings.Join(items[:n], ", "), len(items)-n)
}

// Sparkline draws counts as block characters scaled to the largest; a
// zero is a blank, so an empty queue reads as nothing, and a gap (an
// index of v with no data) is a '·'.
func Sparkline(v []int, gaps ...int) string {
	bars := []rune("▁▂▃▄▅▆▇█")
	peak := 0
	for _, x := range v {
		peak = max(peak, x)
	}
	var b strings.Builder
	for i, x := range v {
		if slices.Contains(gaps, i) {
			b.WriteRune('·')
			continue
		}
		if x <= 0 {
			b.WriteByte(' ')
			continue
		}
		i := (x*len(bars) - 1) / peak
		b.WriteRune(bars[min(i, len(bars)-1)])
	}
	return b.String()
}

// Dur renders a duration to the second, or to the millisecond below one:
// the report's one way of writing a time span (text and HTML).
func Dur(d time.Duration) string {
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// OrDash is s, or a dash for nothing.
func OrDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}
