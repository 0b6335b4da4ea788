package registry

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"
)

// Seed 003's registry, kept by hand, is read as it is: its fixed id and
// its two FNV-1a patterns, named by their component, each with its line;
// the change log's table is left alone.
func TestParseHandKeptTable(t *testing.T) {
	f, err := os.Open("testdata/mais.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("%d entries, want 3: %+v", len(got), got)
	}
	if e := got[0]; e.Kind != Fixed || e.ID != 42424242 || e.Name != "IdempotencyService" || e.Line != 24 ||
		e.LockType != "Session (`pg_try_advisory_lock`)" || e.FileRef != "server/src/services/idempotency.service.ts:41" {
		t.Errorf("fixed id: %+v", e)
	}
	if e := got[1]; e.Kind != Hashed || e.Pattern != "{tenantId}:{date}" || e.Name != "BookingRepository" || e.Line != 37 {
		t.Errorf("first pattern: %+v", e)
	}
	// The same component twice: the second is told apart by its key.
	if e := got[2]; e.Kind != Hashed || e.Pattern != "{tenantId}:balance:{bookingId}" || e.Name != "BookingRepository {tenantId}:balance:{bookingId}" {
		t.Errorf("second pattern: %+v", e)
	}
	if _, err := New(got); err != nil {
		t.Errorf("a hand-kept table with no duplicate is not a registry: %v", err)
	}
}

// The table `locktop registry` prints reads back as the same entries.
func TestMarkdownRoundTrip(t *testing.T) {
	for _, r := range []*Registry{Everywhere(), Builtin()} {
		var b bytes.Buffer
		if err := r.WriteMarkdown(&b); err != nil {
			t.Fatal(err)
		}
		got, err := Parse(&b)
		if err != nil {
			t.Fatal(err)
		}
		want := r.Entries()
		if len(got) != len(want) {
			t.Fatalf("%d entries read back, want %d", len(got), len(want))
		}
		for i := range want {
			g, w := got[i], want[i]
			g.Line = 0
			if g.Name != w.Name || g.Kind != w.Kind || g.ID != w.ID || g.Pattern != w.Pattern || g.Owner != w.Owner ||
				g.Purpose != w.Purpose || g.FileRef != w.FileRef || !slices.Equal(g.Applications, w.Applications) {
				t.Errorf("entry %d read back as %+v, want %+v", i, g, w)
			}
		}
	}
}

// A user's file: scoped entries of every kind.
func TestParseScopedFile(t *testing.T) {
	r, err := Load("testdata/scoped.md")
	if err != nil {
		t.Fatal(err)
	}
	in := func(db string, apps ...string) Scope { return Scope{Database: db, Applications: apps} }
	for _, c := range []struct {
		pair bool
		hi   int32
		v    int64
		sc   Scope
		want string
	}{
		{true, 7, 0, in("billing", "psql"), "BILLING_RUN"},
		{true, 7, 0, in("billing_eu"), "BILLING_RUN"},
		{true, 7, 0, in("shop", "psql"), "7"}, // another database: a bare space
		{false, 0, 42, in("any", "cron-nightly"), "NIGHTLY"},
		{false, 0, 42, in("any", "psql"), ""}, // another application
	} {
		if got := r.Namespace(c.pair, c.hi, c.v, c.sc); got != c.want {
			t.Errorf("Namespace(%v, %d, %d, %+v) = %q, want %q", c.pair, c.hi, c.v, c.sc, got, c.want)
		}
	}
	if got := r.NameOf(LeaseLevel, "tile:t9", Scope{}); got != "TILE" {
		t.Errorf("lease level: %q", got)
	}
	if got := r.NameOf(RedisKey, "q:mail", Scope{}); got != "QUEUE" {
		t.Errorf("Redis key: %q", got)
	}
}

// Problems name the lines: a space used twice, and (a warning) a fixed id
// that a hashed key can collide with.
func TestProblemsWithLines(t *testing.T) {
	f, err := os.Open("testdata/bad.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	entries, err := Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	var errs, warns []string
	for _, p := range Problems(entries) {
		if p.Warning {
			warns = append(warns, p.Error())
		} else {
			errs = append(errs, p.Error())
		}
	}
	if len(errs) != 1 || !strings.Contains(errs[0], "line 7:") || !strings.Contains(errs[0], "namespace 3 used by both Exporter (line 5) and Importer (line 7)") {
		t.Errorf("errors: %q", errs)
	}
	if len(warns) != 1 || !strings.Contains(warns[0], "line 6:") || !strings.Contains(warns[0], "fixed id 99") {
		t.Errorf("warnings: %q", warns)
	}
	if _, err := New(entries); err == nil {
		t.Error("a registry with a space used twice was accepted")
	}
	// The same space in two databases is no collision.
	a := Entry{Name: "A", Kind: Space, ID: 3, Databases: []string{"shop"}}
	b := Entry{Name: "B", Kind: Space, ID: 3, Databases: []string{"billing"}}
	if ps := Problems([]Entry{a, b}); len(ps) != 0 {
		t.Errorf("one space in two databases: %v", ps)
	}
}

func TestParseRejects(t *testing.T) {
	for name, text := range map[string]string{
		"no table": "# nothing\n\nsome text\n",
		"bad key":  "| Lock ID | Component |\n|---|---|\n| `seven` | x |\n",
	} {
		if _, err := Parse(strings.NewReader(text)); err == nil {
			t.Errorf("%s: accepted", name)
		} else if name == "bad key" && !strings.Contains(err.Error(), "line 3") {
			t.Errorf("%s: %v does not say the line", name, err)
		}
	}
}

// The built-in entries name an advisory key only where this project's own
// sessions hold or wait for it: pg_advisory_lock(1, 7) in someone else's
// database is (1, 7), not AGENT 7.
func TestBuiltinScope(t *testing.T) {
	b := Builtin()
	if got := b.Namespace(true, SpaceAgent, 0, Scope{Database: "shop", Applications: []string{"psql"}}); got != "1" {
		t.Errorf("a stranger's (1, 7) is named %q", got)
	}
	if got := b.Namespace(true, SpaceAgent, 0, Scope{Database: "shop", Applications: []string{"psql", "locktop.lock"}}); got != "AGENT" {
		t.Errorf("the lock library's own key is named %q", got)
	}
	if got := b.Namespace(false, 0, IdempotencyCleanupID, Scope{Applications: []string{"psql"}}); got != "" {
		t.Errorf("a stranger's 42424242 is named %q", got)
	}
	if got := Everywhere().Namespace(true, SpaceAgent, 0, Scope{Database: "shop"}); got != "AGENT" {
		t.Errorf("everywhere: %q", got)
	}
	// A user's registry comes first; the built-in one still names our own.
	user, err := New([]Entry{{Name: "TEAM", Kind: Space, ID: 1, Databases: []string{"shop"}}})
	if err != nil {
		t.Fatal(err)
	}
	j := Join(user, b)
	if got := j.Namespace(true, 1, 0, Scope{Database: "shop", Applications: []string{"locktop.lock"}}); got != "TEAM" {
		t.Errorf("joined, in shop: %q", got)
	}
	if got := j.Namespace(true, 1, 0, Scope{Database: "sim", Applications: []string{"locktop.lock"}}); got != "AGENT" {
		t.Errorf("joined, elsewhere: %q", got)
	}
}

// A key is named alike in every scope only when the first entry that could
// name it applies everywhere; a scoped entry before it makes the name
// depend on the sessions.
func TestUnscoped(t *testing.T) {
	if name, ok := Everywhere().Unscoped(true, SpaceAgent, 0); !ok || name != "AGENT" {
		t.Errorf("everywhere: %q, %v", name, ok)
	}
	if _, ok := Builtin().Unscoped(true, SpaceAgent, 0); ok {
		t.Error("the built-in entries apply to this project's sessions only, yet unscoped")
	}
	if _, ok := Everywhere().Unscoped(true, 987654, 0); ok {
		t.Error("a space no entry names is unscoped")
	}
	user, err := New([]Entry{{Name: "TEAM", Kind: Space, ID: 1, Databases: []string{"shop"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := Join(user, Everywhere()).Unscoped(true, 1, 0); ok {
		t.Error("a scoped entry first, yet unscoped")
	}
}
