package incident

import (
	"bytes"
	"encoding/json"
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

// incident is 20 seconds of a stall, one snapshot a second: AGENT 7 held by
// 100 with 201 and 202 queued behind it; AGENT 9 held by 300 with one
// waiter; a lease that runs out and is recovered, and one taken while it
// still had time (lost).
func incident(sec int) model.Snapshot {
	t := t0.Add(time.Duration(sec) * time.Second)
	s := model.Snapshot{Taken: t, Connections: 12}
	adv := func(ns string, id int64, pid int32, granted bool, since time.Time, pos int, behind ...int32) {
		l := model.Lock{Kind: model.KindAdvisory, PID: pid, Database: "app", Backend: &model.Backend{ApplicationName: "hook"}, Mode: model.ModeExclusive,
			Granted: granted, Namespace: ns, EntityID: id, Pair: true, QueuePos: pos, BlockedBy: behind}
		if granted {
			l.HeldSince = since
		} else {
			l.WaitStart = since
		}
		s.Locks = append(s.Locks, l)
	}
	lease := func(name, owner string, since, expires time.Time) {
		s.Locks = append(s.Locks, model.Lock{Kind: model.KindLease, Database: "app", Granted: true, Name: name,
			Owner: owner, HeldSince: since, Expires: expires, Mode: "write"})
	}
	at := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Second) }
	switch {
	case sec < 10:
		adv("AGENT", 7, 100, true, at(-30), 0)
		if sec >= 2 {
			adv("AGENT", 7, 201, false, at(2), 1, 100)
		}
		if sec >= 4 {
			adv("AGENT", 7, 202, false, at(4), 2, 100)
		}
	case sec < 15:
		adv("AGENT", 7, 201, true, at(10), 0)
		adv("AGENT", 7, 202, false, at(4), 1, 201)
	default:
		adv("AGENT", 7, 202, true, at(15), 0)
	}
	if sec >= 3 && sec < 8 {
		adv("AGENT", 9, 300, true, at(1), 0)
		adv("AGENT", 9, 301, false, at(3), 1, 300)
	}
	if sec < 6 {
		lease("map:m1", "worker-1", at(-10), at(6))
	} else if sec >= 8 {
		lease("map:m1", "worker-2", at(8), at(38))
	}
	if sec < 12 {
		lease("map:m2", "worker-3", at(-5), at(40))
	} else {
		lease("map:m2", "worker-4", at(12), at(42))
	}
	return s
}

func recorded(t *testing.T) *recording.Recording {
	t.Helper()
	var buf bytes.Buffer
	w, err := recording.NewWriter(&buf, recording.Header{Server: "mon@db:5432/app", Sources: []string{"PostgreSQL"}, Start: t0, Interval: time.Second, KeyframeEvery: 8})
	if err != nil {
		t.Fatal(err)
	}
	for sec := range 21 {
		if err := w.Write(0, incident(sec)); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	r, err := recording.Read(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return r
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
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

func TestReportGolden(t *testing.T) {
	rep, err := Build(recorded(t), "mon@db:5432/app", time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	if err := rep.WriteText(&text, TextOptions{Location: time.UTC}); err != nil {
		t.Fatal(err)
	}
	golden(t, "report.golden", text.Bytes())
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "report.json.golden", append(js, '\n'))
}

func TestReportSpan(t *testing.T) {
	// From 03:00:12 on: only 202's wait (the end of it) and the lost lease.
	rep, err := Build(recorded(t), "", t0.Add(12*time.Second), t0.Add(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Snapshots != 9 || len(rep.Waits) != 1 || rep.Waits[0].Waiter != "202" || rep.Waits[0].Outcome != "granted" {
		t.Fatalf("%d snapshots, waits %+v", rep.Snapshots, rep.Waits)
	}
	if len(rep.Leases) != 0 {
		t.Fatalf("lease events %+v: the handover at 03:00:12 is the span's first snapshot, nothing before it to compare", rep.Leases)
	}
}
