package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/locktop/locktop/internal/serve/httpapi"
	"github.com/locktop/locktop/internal/testenv/pgtest"
)

// pileUp is a holder of AGENT key and waiters queued behind it, each on a
// connection of its own; release lets the holder go, and each waiter
// unlocks once granted.
type pileUp struct {
	holder *pgx.Conn
	pid    int32
	done   chan error
	n      int
	key    int
}

func startPileUp(t *testing.T, key, waiters int) *pileUp {
	t.Helper()
	ctx := context.Background()
	p := &pileUp{holder: pgtest.Conn(t), done: make(chan error, waiters), n: waiters, key: key}
	if err := p.holder.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&p.pid); err != nil {
		t.Fatal(err)
	}
	if _, err := p.holder.Exec(ctx, "SELECT pg_advisory_lock(1, $1)", key); err != nil {
		t.Fatal(err)
	}
	for range waiters {
		c := pgtest.Conn(t)
		go func() {
			_, err := c.Exec(ctx, "SELECT pg_advisory_lock(1, $1)", key)
			if err == nil {
				_, err = c.Exec(ctx, "SELECT pg_advisory_unlock(1, $1)", key)
			}
			p.done <- err
		}()
	}
	return p
}

// release lets the holder go and waits for every waiter to have had the
// key.
func (p *pileUp) release(t *testing.T) {
	t.Helper()
	if _, err := p.holder.Exec(context.Background(), "SELECT pg_advisory_unlock(1, $1)", p.key); err != nil {
		t.Fatal(err)
	}
	for range p.n {
		if err := <-p.done; err != nil {
			t.Fatal(err)
		}
	}
}

// onKey counts the holders and waiters of AGENT key in an /api/locks
// document.
func onKey(t *testing.T, body []byte, key int) (held, waiting int) {
	t.Helper()
	var doc httpapi.LocksDocument
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	for _, l := range doc.Locks {
		if l.Key != fmt.Sprintf("AGENT %d", key) {
			continue
		}
		if l.Granted {
			held++
		} else {
			waiting++
		}
	}
	return
}

// A serve with its default flags keeps the recent past: ?at= a moment of a
// pile-up lists its locks, a moment after it none of them, a moment
// outside the history is a 400 that names the kept range, and locktop
// report http://… names the holder the waiters queued behind.
func TestServeAnswersThePast(t *testing.T) {
	const key = 9101
	dsn := pgtest.DSN(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	errc := make(chan error, 1)
	go func() { errc <- runServe(ctx, []string{"--dsn", dsn, "--http", "127.0.0.1:0"}, &stdout, &stderr) }()
	base := waitURL(t, &stdout, errc)

	p := startPileUp(t, key, 3)
	pgtest.Eventually(t, "serve shows the pile-up", func() bool {
		_, body := httpGet(t, base+"/api/locks")
		held, waiting := onKey(t, body, key)
		return held == 1 && waiting == 3
	})
	during := time.Now()
	p.release(t)
	pgtest.Eventually(t, "serve shows the pile-up gone", func() bool {
		_, body := httpGet(t, base+"/api/locks")
		held, waiting := onKey(t, body, key)
		return held == 0 && waiting == 0
	})
	after := time.Now()

	at := func(t0 time.Time) (int, []byte) {
		return httpGet(t, base+"/api/locks?at="+url.QueryEscape(t0.Format(time.RFC3339Nano)))
	}
	code, body := at(during)
	if held, waiting := onKey(t, body, key); code != http.StatusOK || held != 1 || waiting != 3 {
		t.Fatalf("?at= during the pile-up: %d, %d held, %d waiting; want 1 and 3: %s", code, held, waiting, body)
	}
	code, body = at(after)
	if held, waiting := onKey(t, body, key); code != http.StatusOK || held+waiting != 0 {
		t.Fatalf("?at= after the pile-up: %d, %d held, %d waiting; want none: %s", code, held, waiting, body)
	}
	code, body = at(during.Add(-time.Hour))
	if code != http.StatusBadRequest || !bytes.Contains(body, []byte("outside the history, which keeps")) {
		t.Fatalf("?at= an hour before: %d %s; want a 400 naming the kept range", code, body)
	}
	code, body = httpGet(t, base+"/api/locks?at=yesterday")
	if code != http.StatusBadRequest || !bytes.Contains(body, []byte("not a time")) {
		t.Fatalf("?at=yesterday: %d %s", code, body)
	}
	if code, body := httpGet(t, base+"/api/report"); code != http.StatusOK || !bytes.Contains(body, []byte(`"holder":"`+fmt.Sprint(p.pid)+`"`)) {
		t.Fatalf("/api/report: %d, the holder %d not named: %s", code, p.pid, body)
	}

	var out, errOut bytes.Buffer
	if err := runReport(ctx, []string{base}, &out, &errOut); err != nil {
		t.Fatalf("report %s: %v (%s)", base, err, errOut.String())
	}
	if !strings.Contains(out.String(), fmt.Sprint(p.pid)) {
		t.Fatalf("report %s does not name the holder %d:\n%s", base, p.pid, out.String())
	}
	// As the pile-up's root blocker, in its episode.
	out.Reset()
	if err := runReport(ctx, []string{"--json", base}, &out, &errOut); err != nil {
		t.Fatalf("report --json %s: %v (%s)", base, err, errOut.String())
	}
	var rep struct { // the part of incident.Report read here
		Episodes []struct {
			Roots []struct {
				Holder string `json:"holder"`
			} `json:"root_blockers"`
		} `json:"episodes"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("report --json %s: %v: %s", base, err, out.String())
	}
	root := false
	for _, e := range rep.Episodes {
		for _, r := range e.Roots {
			root = root || r.Holder == fmt.Sprint(p.pid)
		}
	}
	if !root {
		t.Fatalf("report %s: no episode names the holder %d as its root blocker: %+v", base, p.pid, rep.Episodes)
	}
	out.Reset()
	if err := runReplay(ctx, []string{base, "--at", "end", "--json"}, &out, &errOut); err != nil {
		t.Fatalf("replay %s: %v", base, err)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}
