package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/locktop/locktop/internal/querytext"
	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/model"
)

// liveRecording records a live server while its locks change, one snapshot
// per change, and returns the file and the document snapshot --json gave
// at each snapshot.
func liveRecording(t *testing.T) (string, []model.Snapshot, []string) {
	t.Helper()
	ctx := context.Background()
	mon, err := openMonitor(ctx, pgtest.DSN(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer mon.Close()
	path := filepath.Join(t.TempDir(), "live.rec")
	w, err := createRecording(path, "test", mon.Info(), []string{primarySource}, time.Second, querytext.Full)
	if err != nil {
		t.Fatal(err)
	}
	a, b, c := pgtest.Conn(t), pgtest.Conn(t), pgtest.Conn(t)
	exec := func(conn *pgx.Conn, sql string) {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	waited := make(chan error, 1)
	var snaps []model.Snapshot
	var docs []string
	// take polls until cond holds of the snapshot, then records it.
	take := func(what string, cond func(*model.Snapshot) bool) {
		var s model.Snapshot
		pgtest.Eventually(t, what, func() bool {
			s, err = mon.Poll(ctx)
			return err == nil && cond(&s)
		})
		if err := w.Write(0, s); err != nil {
			t.Fatal(err)
		}
		var doc bytes.Buffer
		printJSON(&doc, snapshotDocument(s, mon.Info(), false))
		snaps, docs = append(snaps, s), append(docs, doc.String())
	}
	rows := func(s *model.Snapshot, id int64) (held, waiting int) {
		for _, l := range s.Locks {
			if l.Namespace == "AGENT" && l.EntityID == id {
				if l.Granted {
					held++
				} else {
					waiting++
				}
			}
		}
		return
	}
	is := func(id int64, h, wt int) func(*model.Snapshot) bool {
		return func(s *model.Snapshot) bool { gh, gw := rows(s, id); return gh == h && gw == wt }
	}
	exec(a, "SELECT pg_advisory_lock(1, 7100)")
	take("a holds 7100", is(7100, 1, 0))
	go func() { _, err := b.Exec(ctx, "SELECT pg_advisory_lock(1, 7100)"); waited <- err }()
	take("b waits for 7100", is(7100, 1, 1))
	take("unchanged, a second later", func(s *model.Snapshot) bool {
		return s.Taken.Sub(snaps[1].Taken) > 200*time.Millisecond && is(7100, 1, 1)(s)
	})
	exec(c, "SELECT pg_advisory_lock(1, 7200)")
	take("c holds 7200", is(7200, 1, 0))
	exec(a, "SELECT pg_advisory_unlock(1, 7100)")
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
	take("b holds 7100", is(7100, 1, 0))
	exec(c, "SELECT pg_advisory_unlock_all()")
	take("7200 free", is(7200, 0, 0))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path, snaps, docs
}

// replayJSON runs locktop replay FILE --at AT --json.
func replayJSON(t *testing.T, path string, at time.Time) (string, string, int) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run([]string{"replay", path, "--at", at.Format(time.RFC3339Nano), "--json"}, &stdout, &stderr)
	return stdout.String(), stderr.String(), code
}

func TestRecordReplayLive(t *testing.T) {
	path, snaps, docs := liveRecording(t)
	for i, s := range snaps {
		got, stderr, code := replayJSON(t, path, s.Taken)
		if code != exitOK || stderr != "" {
			t.Fatalf("snapshot %d: exit %d: %s", i, code, stderr)
		}
		if got != docs[i] {
			t.Fatalf("snapshot %d: replay --json differs from the live document\n--- replay\n%s\n--- live\n%s", i, got, docs[i])
		}
	}
	// Between two snapshots, the earlier one.
	mid := snaps[3].Taken.Add(snaps[4].Taken.Sub(snaps[3].Taken) / 2)
	if got, _, _ := replayJSON(t, path, mid); got != docs[3] {
		t.Fatal("a time between two snapshots does not give the earlier one")
	}
	// Before the start: one line, exit 2.
	if _, stderr, code := replayJSON(t, path, snaps[0].Taken.Add(-time.Hour)); code != exitUsage || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "starts at") {
		t.Fatalf("before the start: exit %d, %q", code, stderr)
	}
	// The report of the same file names the wait of 7100 and its holder.
	var stdout, stderr bytes.Buffer
	if code := run([]string{"report", path, "--json"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("report: exit %d: %s", code, stderr.String())
	}
	var rep struct {
		Keys []struct {
			Key   string `json:"key"`
			Waits int    `json:"waits"`
		} `json:"keys"`
		Blockers []struct {
			Key     string `json:"key"`
			Waiters int    `json:"waiters"`
		} `json:"blockers"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Keys) != 1 || rep.Keys[0].Key != "AGENT 7100" || rep.Keys[0].Waits != 1 || len(rep.Blockers) != 1 || rep.Blockers[0].Waiters != 1 {
		t.Fatalf("report %s", stdout.String())
	}
}

func TestReplayDamagedFiles(t *testing.T) {
	path, snaps, docs := liveRecording(t)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// A torn last record: the others replay, with a warning.
	torn := filepath.Join(t.TempDir(), "torn.rec")
	os.WriteFile(torn, data[:len(data)-9], 0o644)
	got, stderr, code := replayJSON(t, torn, snaps[4].Taken)
	if code != exitOK || got != docs[4] || !strings.Contains(stderr, "1 damaged records skipped") || !strings.Contains(stderr, "torn") {
		t.Fatalf("torn: exit %d, stderr %q", code, stderr)
	}
	// The last snapshot is gone: its time gives the one before.
	if got, _, _ := replayJSON(t, torn, snaps[5].Taken); got != docs[4] {
		t.Fatal("the torn record's time does not give the snapshot before it")
	}
	// A newer format: one clear line, exit 2.
	newer := filepath.Join(t.TempDir(), "newer.rec")
	bumped := bytes.Clone(data)
	bumped[9] = 99
	os.WriteFile(newer, bumped, 0o644)
	var out, errb bytes.Buffer
	if code := run([]string{"report", newer}, &out, &errb); code != exitUsage || strings.Count(errb.String(), "\n") != 1 || !strings.Contains(errb.String(), "newer locktop") {
		t.Fatalf("newer: exit %d, %q", code, errb.String())
	}
	// Not a recording at all.
	errb.Reset()
	if code := run([]string{"replay", "doc.go", "--at", "start", "--json"}, &out, &errb); code != exitUsage || !strings.Contains(errb.String(), "not a locktop recording") {
		t.Fatalf("doc.go: exit %d, %q", code, errb.String())
	}
}

func TestRecordCommand(t *testing.T) {
	holder := pgtest.Conn(t)
	if _, err := holder.Exec(context.Background(), "SELECT pg_advisory_lock(1, 7300)"); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "cmd.rec")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"record", "--out", path, "--interval", "100ms", "--duration", "600ms", "--dsn", pgtest.DSN(t)}, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "snapshots") {
		t.Fatalf("stdout %q", stdout.String())
	}
	stdout.Reset()
	if code := run([]string{"replay", path, "--at", "end", "--json"}, &stdout, &stderr); code != exitOK || !strings.Contains(stdout.String(), `"AGENT 7300"`) {
		t.Fatalf("exit %d: %s %s", code, stdout.String(), stderr.String())
	}
	// Never overwritten.
	stderr.Reset()
	if code := run([]string{"record", "--out", path, "--duration", "1s", "--dsn", pgtest.DSN(t)}, &stdout, &stderr); code != exitUsage || !strings.Contains(stderr.String(), "exists") {
		t.Fatalf("second record: exit %d, %q", code, stderr.String())
	}
	// --out is required.
	stderr.Reset()
	if code := run([]string{"record", "--dsn", pgtest.DSN(t)}, &stdout, &stderr); code != exitUsage || !strings.Contains(stderr.String(), "--out") {
		t.Fatalf("no --out: exit %d, %q", code, stderr.String())
	}
}
