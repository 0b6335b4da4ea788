package model

import (
	"strings"
	"testing"
)

func TestOwnerInAppNameRoundTrips(t *testing.T) {
	for _, c := range []struct{ app, owner, wantApp string }{
		{"worker", "pod-3:4711:9f2c", "worker"},
		{"", "pod-3:4711:9f2c", ""},
		{strings.Repeat("a", 80), "pod-3:4711:9f2c", strings.Repeat("a", 63-len(" owner=pod-3:4711:9f2c"))},
	} {
		s := AppWithOwner(c.app, c.owner)
		if len(s) > 63 {
			t.Errorf("AppWithOwner(%q, %q) = %d bytes, over PostgreSQL's 63", c.app, c.owner, len(s))
		}
		app, owner, ok := OwnerFromApp(s)
		if !ok || owner != c.owner || app != c.wantApp {
			t.Errorf("OwnerFromApp(%q) = %q, %q, %v; want %q, %q, true", s, app, owner, ok, c.wantApp, c.owner)
		}
	}
	if _, _, ok := OwnerFromApp("psql"); ok {
		t.Error("OwnerFromApp(psql) found an owner")
	}
	if got := AppWithOwner("worker", ""); got != "worker" {
		t.Errorf("AppWithOwner without owner = %q", got)
	}
}
