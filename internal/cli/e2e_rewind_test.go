package cli

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/locktop/locktop/internal/testenv/pgcluster"
)

// rewindLater is how long after the pile-up's peak the rewind key is
// pressed, by the server's clock (the clock of the dashboard's timeline);
// laterStep is how far that clock is moved at a time, a poll seeing each
// step, so the history holds the empty server after the pile-up as it
// would had the minutes passed.
const (
	rewindLater = 2 * time.Minute
	laterStep   = 30 * time.Second
)

// A pile-up builds and clears on a server; two minutes later, in the same
// dashboard, the rewind key shows it at its peak with its hold time, and
// the live key shows the live server again. The two minutes pass on the
// server's clock (libfaketime): the dashboard times everything it shows
// and keeps by the clock of the server it polls.
func TestDashboardRewindsAPileUp(t *testing.T) {
	t.Parallel() // servers and a terminal of its own: it waits beside the others
	bin := buildLocktop(t)
	ctx := context.Background()
	c, err := pgcluster.Start(ctx, pgcluster.Options{MovableClock: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	conn := func() *pgx.Conn {
		t.Helper()
		cn, err := pgx.Connect(ctx, c.DSN("postgres"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cn.Close(context.Background()) })
		return cn
	}
	term := startTerminal(t, termOptions{Width: 160, Height: 32},
		bin, "--registry", "builtin", "--dsn", c.DSN("postgres"), "--interval", "1s", "--log", filepath.Join(t.TempDir(), "locktop.log"))
	term.AwaitText(30*time.Second, "connected")

	// The pile-up: a holder of AGENT 4712 and three waiters behind it.
	holder := conn()
	var holderPID int
	if err := holder.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&holderPID); err != nil {
		t.Fatal(err)
	}
	if _, err := holder.Exec(ctx, "SELECT pg_advisory_lock(1, 4712)"); err != nil {
		t.Fatal(err)
	}
	acquired := time.Now()
	done := make(chan error, 3)
	for range 3 {
		w := conn()
		go func() {
			_, err := w.Exec(ctx, "SELECT pg_advisory_lock(1, 4712)")
			if err == nil {
				_, err = w.Exec(ctx, "SELECT pg_advisory_unlock(1, 4712)")
			}
			done <- err
		}()
	}
	term.AwaitText(30*time.Second, "AGENT 4712", "waits #3", strconv.Itoa(holderPID))
	// Hold on a while at the peak, so the hold time on screen means
	// something, and note a moment of it.
	time.Sleep(3 * time.Second) // the length of the hold under test, not a synchronisation
	term.AwaitText(10*time.Second, "waits #3")
	heldAtPeak := time.Since(acquired)
	var peak time.Time // by the server's clock, as the dashboard shows it
	if err := holder.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&peak); err != nil {
		t.Fatal(err)
	}
	peak = peak.Local()
	if _, err := holder.Exec(ctx, "SELECT pg_advisory_unlock(1, 4712)"); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	term.AwaitText(30*time.Second, "No locks are held or awaited right now")

	// Two minutes pass on the server, a step at a time, the live view
	// polling on: each step is seen when the header's "at" (the last
	// poll's server time) reaches it.
	for moved := laterStep; moved <= rewindLater; moved += laterStep {
		if err := c.AdvanceClock(laterStep); err != nil {
			t.Fatal(err)
		}
		term.Await(fmt.Sprintf("a poll %v after the peak", moved), 30*time.Second, func(s string) bool {
			at, ok := shownTime(s, ` at (\d\d:\d\d:\d\d)`, peak)
			return ok && at.Sub(peak) >= moved && strings.Contains(s, "No locks are held or awaited right now")
		})
	}

	term.Keys("b")
	s := term.AwaitText(10*time.Second, "REWOUND · NOT LIVE")
	// The history reaches the present: the pile-up is two minutes old on
	// its timeline.
	if last, ok := shownTime(s, `history \d\d:\d\d:\d\d – (\d\d:\d\d:\d\d)`, peak); !ok || last.Sub(peak) < rewindLater {
		t.Fatalf("rewound, the history ends %v after the peak (%s), want at least %v:\n%s", last.Sub(peak), peak.Format("15:04:05"), rewindLater, s)
	}
	term.Keys("t")
	term.Type(peak.Format("15:04:05"))
	term.Keys("Enter")
	s = term.AwaitText(10*time.Second, "REWOUND · NOT LIVE", "AGENT 4712", "waits #3", strconv.Itoa(holderPID))
	// The holder's time at the peak: at least what it had held by then,
	// less a poll, and not what it would be now (timed by the live clock).
	row := ""
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, strconv.Itoa(holderPID)) && (strings.Contains(l, "holds") || strings.Contains(l, "ROOT")) {
			row = l
		}
	}
	m := regexp.MustCompile(`≥((?:\d+h)?(?:\d+m)?(?:\d+(?:\.\d+)?s)?)`).FindStringSubmatch(row)
	if m == nil {
		t.Fatalf("no hold time on the holder's row %q:\n%s", row, s)
	}
	held, err := time.ParseDuration(m[1])
	if err != nil {
		t.Fatalf("the holder's time %q on %q: %v", m[1], row, err)
	}
	if lo, hi := heldAtPeak-2*time.Second, heldAtPeak+10*time.Second; held < lo || held > hi {
		t.Fatalf("rewound, the holder's time is %v, want %v–%v (held %v at the peak): %q", held, lo, hi, heldAtPeak.Round(time.Second), row)
	}

	term.Keys("L")
	live := term.AwaitGone(10*time.Second, "REWOUND")
	if strings.Contains(live, "waits #") || !strings.Contains(live, "LIVE") {
		t.Fatalf("back to live, the cleared pile-up is still shown:\n%s", live)
	}
	// The live server again: its polls, two minutes after the peak.
	term.Await("the live server's polls", 10*time.Second, func(s string) bool {
		at, ok := shownTime(s, ` at (\d\d:\d\d:\d\d)`, peak)
		return ok && at.Sub(peak) >= rewindLater && strings.Contains(s, "No locks are held or awaited right now") && strings.Contains(s, "connected")
	})
}

// shownTime finds the time of day that re's group matches on screen and
// places it on the day of near (a screen shows no date): the moment of
// that time of day closest to near.
func shownTime(screen, re string, near time.Time) (time.Time, bool) {
	m := regexp.MustCompile(re).FindStringSubmatch(screen)
	if m == nil {
		return time.Time{}, false
	}
	c, err := time.ParseInLocation("15:04:05", m[1], near.Location())
	if err != nil {
		return time.Time{}, false
	}
	t := time.Date(near.Year(), near.Month(), near.Day(), c.Hour(), c.Minute(), c.Second(), 0, near.Location())
	switch d := t.Sub(near); {
	case d > 12*time.Hour:
		t = t.AddDate(0, 0, -1)
	case d < -12*time.Hour:
		t = t.AddDate(0, 0, 1)
	}
	return t, true
}
