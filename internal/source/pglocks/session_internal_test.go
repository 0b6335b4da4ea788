package pglocks

import (
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// TestAttackSessionOfComparesEveryField (bp8): a Reader keeps a session's
// *Backend only when every field the server shows is unchanged. A session
// row that differs in any one of them (and a new session on a reused pid
// differs at least in its timestamps) gets a new Backend; and a field
// added to Backend must be compared too, or a changed session would keep
// the last read's stale value.
func TestAttackSessionOfComparesEveryField(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	text := func(s string) rawText { return rawText{b: []byte(s), valid: true} }
	ts := func(d time.Duration) pgtype.Timestamptz { return pgtype.Timestamptz{Time: t0.Add(d), Valid: true} }
	base := func() wireRow {
		return wireRow{kind: 2, t1: text("app_user"), t2: text("svc"), t3: text("10.0.0.1"), t4: text("idle"), t5: text("SELECT 1"),
			ts: ts(0), ts2: ts(time.Second), ts3: ts(2 * time.Second)}
	}
	w := base()
	last := sessionOf(&w, nil)
	if again := sessionOf(&w, last); again != last {
		t.Fatalf("an unchanged session got a new Backend: %+v", again)
	}
	changes := map[string]func(*wireRow){
		"User":        func(w *wireRow) { w.t1 = text("other_user") },
		"Application": func(w *wireRow) { w.t2 = text("svc2") },
		"ClientAddr":  func(w *wireRow) { w.t3 = text("10.0.0.2") },
		"State":       func(w *wireRow) { w.t4 = text("active") },
		"Query":       func(w *wireRow) { w.t5 = text("SELECT 2") },
		"QueryStart":  func(w *wireRow) { w.ts = ts(time.Millisecond) },
		"StateChange": func(w *wireRow) { w.ts2 = pgtype.Timestamptz{} },
		"XactStart":   func(w *wireRow) { w.ts3 = pgtype.Timestamptz{} },
	}
	for i := range reflect.TypeFor[Backend]().NumField() {
		name := reflect.TypeFor[Backend]().Field(i).Name
		change, ok := changes[name]
		if !ok {
			t.Errorf("Backend.%s: a field this test (and sessionOf) does not compare", name)
			continue
		}
		w := base()
		change(&w)
		b := sessionOf(&w, last)
		if b == last {
			t.Errorf("a session whose %s changed kept its Backend", name)
		}
		if reflect.ValueOf(*b).Field(i).Interface() == reflect.ValueOf(*last).Field(i).Interface() {
			t.Errorf("%s: the new Backend shows the old value", name)
		}
	}
}
