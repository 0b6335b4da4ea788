package lockcore

import (
	"strings"
	"testing"
)

// A duplicate id, space, pattern or name in the registry fails this test.
func TestRegistryUnique(t *testing.T) {
	if err := CheckRegistry(); err != nil {
		t.Fatal(err)
	}
}

func TestRegistryRejectsDuplicates(t *testing.T) {
	base := Entry{Name: "A", Kind: KindSpace, ID: 1}
	for name, entries := range map[string][]Entry{
		"space":   {base, {Name: "B", Kind: KindSpace, ID: 1}},
		"fixed":   {{Name: "A", Kind: KindFixed, ID: 42}, {Name: "B", Kind: KindFixed, ID: 42}},
		"pattern": {{Name: "A", Kind: KindHashed, Pattern: "{x}"}, {Name: "B", Kind: KindHashed, Pattern: "{x}"}},
		"name":    {base, {Name: "A", Kind: KindSpace, ID: 2}},
		"range":   {{Name: "A", Kind: KindSpace, ID: 1 << 40}},
	} {
		if err := validate(entries); err == nil {
			t.Errorf("%s: duplicate accepted", name)
		}
	}
}

func TestRegistryHasSeedEntries(t *testing.T) {
	var b strings.Builder
	if err := WriteRegistryMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{"| AGENT | `(1, id)` |", "`42424242`", "`{tenantId}:{date}`", "`{tenantId}:balance:{bookingId}`", "IdempotencyService", "BookingRepository"} {
		if !strings.Contains(md, want) {
			t.Errorf("registry table lacks %q:\n%s", want, md)
		}
	}
	for _, e := range Registered() {
		if e.Owner == "" || e.Purpose == "" || e.Scope == "" || e.LockType == "" {
			t.Errorf("%s: owner, purpose, scope and lock type are all required", e.Name)
		}
	}
}
