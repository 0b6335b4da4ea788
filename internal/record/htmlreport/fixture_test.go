package htmlreport

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/record/recording"
	"github.com/locktop/locktop/model"
)

var update = flag.Bool("update", false, "rewrite the golden files")

var t0 = time.Date(2026, 1, 15, 3, 0, 0, 0, time.UTC)

// Hostile strings a session can put in its application name, its query or
// a lease owner: markup that would run script or inject an element, and
// a bidi override that would reorder the text after it.
const (
	evilScript = `<script>window.__pwned="script"</script>`
	evilImg    = `"><img src=x onerror="window.__pwned='img'">`
	evilBidi   = "evil\u202Egnp.exe\u2066x"
)

// pileUp is 30 seconds of a stall, a snapshot a second: AGENT 7 held by
// 100 with 201 and 202 queued behind it (201 is granted, 202 gives up);
// AGENT 9 held by 300 with 301 behind it; a lease that runs out and is
// recovered by another owner; the Redis source failing from second 20 to
// 23. With hostile set, the application names, queries, an owner and the
// lease's resource name carry markup and bidi controls.
func pileUp(sec int, hostile bool) model.Snapshot {
	t := t0.Add(time.Duration(sec) * time.Second)
	s := model.Snapshot{Taken: t, Connections: 12}
	app, query, owner, resource := "hook", "SELECT pg_advisory_lock(1, 7)", "worker-2", "map:m1"
	if hostile {
		app, query, owner = evilScript+evilBidi, "SELECT 1 /* "+evilImg+" */ -- \u202Edrop", evilImg
		resource = `map:</text><svg onload="window.__pwned='lane'">` + "\u202E"
	}
	at := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Second) }
	adv := func(id int64, pid int32, granted bool, since time.Time, behind ...int32) {
		l := model.Lock{Kind: model.KindAdvisory, PID: pid, Database: "app", Backend: &model.Backend{ApplicationName: app, Query: query}, Mode: model.ModeExclusive,
			Granted: granted, Namespace: "AGENT", EntityID: id, Pair: true, BlockedBy: behind}
		if granted {
			l.HeldSince = since
		} else {
			l.WaitStart = since
		}
		s.Locks = append(s.Locks, l)
	}
	switch {
	case sec < 12:
		adv(7, 100, true, at(-20))
		if sec >= 2 {
			adv(7, 201, false, at(2), 100)
		}
		if sec >= 4 && sec < 9 {
			adv(7, 202, false, at(4), 100)
		}
	case sec < 18:
		adv(7, 201, true, at(12))
	}
	if sec >= 5 && sec < 14 {
		adv(9, 300, true, at(3))
		adv(9, 301, false, at(5), 300)
	}
	lease := func(o string, since, expires time.Time) {
		s.Locks = append(s.Locks, model.Lock{Kind: model.KindLease, Database: "app", Granted: true, Name: resource,
			Owner: o, HeldSince: since, Expires: expires, Mode: "write", Backend: &model.Backend{ApplicationName: app}})
	}
	switch {
	case sec < 8:
		lease("worker-1", at(-10), at(6))
	case sec >= 10:
		lease(owner, at(10), at(40))
	}
	if sec >= 20 && sec < 23 {
		s.Sources = []model.SourceStatus{{Name: "PostgreSQL", Taken: t}, {Name: "Redis", Err: "dial tcp 127.0.0.1:6379: connection refused"}}
	}
	return s
}

// recorded writes 30 seconds of pileUp as a recording and reads it back.
func recorded(t testing.TB, hostile bool) *recording.Recording {
	t.Helper()
	var buf bytes.Buffer
	w, err := recording.NewWriter(&buf, recording.Header{Server: "mon@db:5432/app", Sources: []string{"PostgreSQL", "Redis"},
		Start: t0, Interval: time.Second, KeyframeEvery: 8, Locktop: "v0.9.0"})
	if err != nil {
		t.Fatal(err)
	}
	for sec := range 31 {
		if err := w.Write(0, pileUp(sec, hostile)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := recording.Read(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// rendered renders a recording's whole span as the CLI does.
func rendered(t testing.TB, r *recording.Recording) []byte {
	t.Helper()
	rep, tl, err := Review(r, r.Header.Server, time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := Write(&b, rep, tl, Options{Location: time.UTC, Sources: r.Header.Sources, Recorded: r.Header.Locktop, Version: "test"}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(p, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (go test -update creates it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from what is rendered now (go test -update rewrites it; diff the two to review)", p)
	}
}
