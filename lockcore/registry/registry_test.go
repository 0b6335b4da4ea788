package registry

import (
	"strings"
	"testing"
)

// A duplicate id, space, pattern or name in the table fails this test.
func TestUnique(t *testing.T) {
	if err := Check(); err != nil {
		t.Fatal(err)
	}
}

func TestRejectsDuplicates(t *testing.T) {
	base := Entry{Name: "A", Kind: Space, ID: 1}
	for name, list := range map[string][]Entry{
		"space":   {base, {Name: "B", Kind: Space, ID: 1}},
		"fixed":   {{Name: "A", Kind: Fixed, ID: 42}, {Name: "B", Kind: Fixed, ID: 42}},
		"pattern": {{Name: "A", Kind: Hashed, Pattern: "{x}"}, {Name: "B", Kind: Hashed, Pattern: "{x}"}},
		"redis":   {{Name: "A", Kind: RedisKey, Pattern: "s:{x}"}, {Name: "B", Kind: RedisKey, Pattern: "s:{x}"}},
		"level":   {{Name: "A", Kind: LeaseLevel, ID: 1, Pattern: "a:{x}"}, {Name: "B", Kind: LeaseLevel, ID: 1, Pattern: "b:{x}"}},
		"name":    {base, {Name: "A", Kind: Space, ID: 2}},
		"range":   {{Name: "A", Kind: Space, ID: 1 << 40}},
		"nopat":   {{Name: "A", Kind: RedisKey}},
	} {
		if err := validate(list); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestTableHasEveryKind(t *testing.T) {
	var b strings.Builder
	if err := WriteMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{"| AGENT | `(1, id)` |", "`42424242`", "`{tenantId}:{date}`", "`{tenantId}:balance:{bookingId}`",
		"IdempotencyService", "BookingRepository", "Redis `sesslock:{tenant}:{agent}:{customer}:{channel}`", "lease `map:{mapId}` (order 2)"} {
		if !strings.Contains(md, want) {
			t.Errorf("registry table lacks %q:\n%s", want, md)
		}
	}
	for _, e := range Entries() {
		if e.Owner == "" || e.Purpose == "" || e.Scope == "" || e.LockType == "" {
			t.Errorf("%s: owner, purpose, scope and lock type are all required", e.Name)
		}
	}
}

// Vectors computed with seed 003's TypeScript hashString under Node.
func TestFNV1a32MatchesSeed003(t *testing.T) {
	for s, want := range map[string]int32{
		"":                           -2128831035,
		"a":                          -468965076,
		"foobar":                     -1080231576,
		"tenant-1:2025-01-15":        761239885,
		"tenant-1:balance:booking-9": 775086422,
		"é":                          1812687940,  // one UTF-16 unit, two UTF-8 bytes
		"😀":                          -885930824,  // a surrogate pair
		"日本語:2025-12-03":             -1150457835, // multi-byte BMP characters
		"AGENT":                      -122962362,
	} {
		if got := FNV1a32(s); got != want {
			t.Errorf("FNV1a32(%q) = %d, want %d", s, got, want)
		}
	}
}

func TestNames(t *testing.T) {
	for _, c := range []struct {
		pair bool
		hi   int32
		v    int64
		id   int64
		want string
	}{
		{true, SpaceAgent, 0, 7, "AGENT 7"},
		{true, 5, 0, -3, "5 -3"},
		{false, 0, IdempotencyCleanupID, IdempotencyCleanupID, "IDEMPOTENCY_CLEANUP"},
		{false, -1, -2128831035, -2128831035, "-2128831035"},
	} {
		ns := AdvisoryNamespace(c.pair, c.hi, c.v)
		if got := AdvisoryLabel(ns, c.id, c.pair); got != c.want {
			t.Errorf("label = %q, want %q", got, c.want)
		}
	}
}

func TestMatch(t *testing.T) {
	for _, c := range []struct {
		kind Kind
		s    string
		want string
	}{
		{Hashed, "tenant-a:2025-01-15", "BOOKING_DATE"},
		{Hashed, "tenant-a:balance:b-9", "BOOKING_BALANCE"},
		{Hashed, "no-colon", ""},
		{Hashed, "a::b", ""},
		{RedisKey, "sesslock:t1:a1:c1:web", "SESSION"},
		{RedisKey, "sesslock:t1:a1:c1", ""},
		{LeaseLevel, "map:m1", "MAP"},
		{LeaseLevel, "sketch:s-2", "SKETCH"},
		{LeaseLevel, "tile:1", ""},
	} {
		e, ok := Match(c.kind, c.s)
		if got := e.Name; !ok && got != "" || ok && got != c.want || !ok && c.want != "" {
			t.Errorf("Match(%s, %q) = %q, %v; want %q", c.kind, c.s, got, ok, c.want)
		}
	}
	if got := (Entry{Pattern: SessionPattern}).Prefix(); got != "sesslock:" {
		t.Errorf("Prefix = %q", got)
	}
}

func TestLabels(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{RowLabel("public.turns", "(0,3)"), "public.turns row (0,3)"},
		{RowLabel("", "(0,3)"), "relation ? row (0,3)"},
		{RowLabel("public.turns", ""), "public.turns"},
		{TransactionLabel("1234"), "transaction 1234"},
		{NamedLabel("map:m1"), "map:m1"},
		{NameOf(RedisKey, "sesslock:t1:a1:c1:web"), "SESSION"},
		{NameOf(LeaseLevel, "map:m1"), "MAP"},
		{NameOf(LeaseLevel, "nothing"), ""},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

func TestRedisPattern(t *testing.T) {
	for _, c := range []struct{ prefix, key, want string }{
		{"sesslock:", "t1:a1:c1:web", SessionPattern},
		{"x:", "t1:a1:c1:web", "x:{tenant}:{agent}:{customer}:{channel}"},
		{"sesslock:", "test:session", OtherPattern},
		{"sesslock:", "a:b:c:d:e", OtherPattern},
	} {
		if got := RedisPattern(c.prefix, c.key); got != c.want {
			t.Errorf("RedisPattern(%q, %q) = %q, want %q", c.prefix, c.key, got, c.want)
		}
	}
}
