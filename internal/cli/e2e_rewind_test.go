package cli

import (
	"context"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/locktop/locktop/internal/testenv/pgcluster"
)

// rewindLater is how long after the pile-up clears the rewind key is
// pressed: the live view has moved on by this many polls.
const rewindLater = 20 * time.Second

// A pile-up builds and clears on a server; later, in the same dashboard,
// the rewind key shows it at its peak with its hold time, and the live key
// shows the live server again.
func TestDashboardRewindsAPileUp(t *testing.T) {
	bin := buildLocktop(t)
	ctx := context.Background()
	c, err := pgcluster.Start(ctx, pgcluster.Options{})
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
	term := startTerminal(t, termOptions{Width: 120, Height: 32},
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
	peak := time.Now().Format("15:04:05") // the dashboard's clock: same machine, same zone
	if _, err := holder.Exec(ctx, "SELECT pg_advisory_unlock(1, 4712)"); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	term.AwaitText(30*time.Second, "No locks are held or awaited right now")
	time.Sleep(rewindLater) // the live view moves on: that is what is under test

	term.Keys("b")
	term.AwaitText(10*time.Second, "REWOUND · NOT LIVE")
	term.Keys("t")
	term.Type(peak)
	term.Keys("Enter")
	s := term.AwaitText(10*time.Second, "REWOUND · NOT LIVE", "AGENT 4712", "waits #3", strconv.Itoa(holderPID))
	// The holder's time at the peak: at least what it had held by then,
	// less a poll.
	row := ""
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, strconv.Itoa(holderPID)) && (strings.Contains(l, "holds") || strings.Contains(l, "ROOT")) {
			row = l
		}
	}
	m := regexp.MustCompile(`≥(\d+(?:\.\d)?)s`).FindStringSubmatch(row)
	if m == nil {
		t.Fatalf("no hold time on the holder's row %q:\n%s", row, s)
	}
	held, _ := strconv.ParseFloat(m[1], 64)
	if want := (heldAtPeak - 2*time.Second).Seconds(); held < want {
		t.Fatalf("rewound, the holder's time is %.1fs, want at least %.1fs: %q", held, want, row)
	}

	term.Keys("L")
	live := term.AwaitGone(10*time.Second, "REWOUND")
	if strings.Contains(live, "waits #") || !strings.Contains(live, "LIVE") {
		t.Fatalf("back to live, the cleared pile-up is still shown:\n%s", live)
	}
	term.AwaitText(10*time.Second, "No locks are held or awaited right now", "connected")
}
