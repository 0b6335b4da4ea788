package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/locktop/locktop/internal/querytext"
	"github.com/locktop/locktop/internal/source/pgsource"
	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/model"
)

// An operator's incident, recorded: a holds 7300 with b queued behind it,
// and a is ended with pg_terminate_backend from another session; c holds
// 7400 and is ended by locktop's own terminate (the dashboard's T). The
// report, its JSON and its page said "released" for both, as for a lock
// let go, and the recording did not say otherwise.
func TestReportTellsTerminatedHolders(t *testing.T) {
	ctx := context.Background()
	mon, err := openMonitor(ctx, pgtest.DSN(t), pgsource.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer mon.Close()
	path := filepath.Join(t.TempDir(), "ended.rec")
	w, err := createRecording(path, "test", mon.Info(), []string{primarySource}, time.Second, querytext.Full)
	if err != nil {
		t.Fatal(err)
	}
	admin, a, b, c := pgtest.Conn(t), pgtest.Conn(t), pgtest.Conn(t), pgtest.Conn(t)
	exec := func(conn *pgx.Conn, sql string) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	has := func(s *model.Snapshot, pid uint32, granted bool) bool {
		for _, l := range s.Locks {
			if l.PID == int32(pid) && l.Granted == granted {
				return true
			}
		}
		return false
	}
	take := func(what string, cond func(*model.Snapshot) bool) {
		t.Helper()
		pgtest.Eventually(t, what, func() bool {
			s, err := mon.Poll(ctx)
			if err != nil || !cond(&s) {
				return false
			}
			if err := w.Write(0, s); err != nil {
				t.Fatal(err)
			}
			return true
		})
	}
	gone := func(pid uint32) {
		t.Helper()
		pgtest.Eventually(t, "backend gone", func() bool {
			var n int
			_ = admin.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid).Scan(&n)
			return n == 0
		})
	}
	pa, pb, pc := a.PgConn().PID(), b.PgConn().PID(), c.PgConn().PID()
	exec(a, "SELECT pg_advisory_lock(1, 7300)")
	exec(c, "SELECT pg_advisory_lock(1, 7400)")
	waited := make(chan error, 1)
	go func() { _, err := b.Exec(ctx, "SELECT pg_advisory_lock(1, 7300)"); waited <- err }()
	take("b waits behind a", func(s *model.Snapshot) bool { return has(s, pb, false) && has(s, pa, true) && has(s, pc, true) })
	exec(admin, "SELECT pg_terminate_backend("+strconv.Itoa(int(pa))+")")
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
	gone(pa)
	take("b holds", func(s *model.Snapshot) bool { return has(s, pb, true) })
	if err := mon.Terminate(ctx, int32(pc)); err != nil {
		t.Fatal(err)
	}
	gone(pc)
	take("c's lock gone", func(s *model.Snapshot) bool { return !has(s, pc, true) })
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	var stdout, stderr bytes.Buffer
	if code := run([]string{"report", path, "--json"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("report: exit %d: %s", code, stderr.String())
	}
	var rep struct {
		Blockers []struct {
			Holder, Outcome, By string
		} `json:"blockers"`
		Holds []struct {
			Holder  string `json:"holder"`
			Outcome string `json:"outcome"`
			By      string `json:"outcome_by"`
		} `json:"longest_holds"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, h := range rep.Holds {
		got[h.Holder] = h.Outcome + "/" + h.By
	}
	want := map[string]string{itoa(pa): "terminated/", itoa(pc): "terminated/locktop", itoa(pb): "held/"}
	for who, o := range want {
		if got[who] != o {
			t.Errorf("hold of %s ended %q, want %q (all %v)", who, got[who], o, got)
		}
	}
	stdout.Reset()
	if code := run([]string{"report", path}, &stdout, &stderr); code != exitOK || !strings.Contains(stdout.String(), "terminated by locktop") {
		t.Errorf("report: exit %d, does not say terminated by locktop:\n%s", code, stdout.String())
	}
	page := filepath.Join(t.TempDir(), "r.html")
	if code := run([]string{"report", path, "--html", page}, &stdout, &stderr); code != exitOK {
		t.Fatalf("report --html: exit %d: %s", code, stderr.String())
	}
	if html, err := os.ReadFile(page); err != nil || !strings.Contains(string(html), `class="bar hold o-terminated`) {
		t.Errorf("the page draws no terminated hold (%v)", err)
	}
}

func itoa(p uint32) string { return strconv.Itoa(int(p)) }
