package htmlreport

import (
	"bytes"
	"strings"
	"testing"
)

func TestPageGolden(t *testing.T) {
	got := rendered(t, recorded(t, false))
	if again := rendered(t, recorded(t, false)); !bytes.Equal(got, again) {
		t.Fatal("two renders of the same recording differ")
	}
	golden(t, "pileup.html.golden", got)
}

// TestHostileStringsEscaped checks the bytes; the browser test checks
// that nothing of them is active in the page.
func TestHostileStringsEscaped(t *testing.T) {
	got := string(rendered(t, recorded(t, true)))
	for _, bad := range []string{"<script", "<img", "onerror=\"", "\u202E", "\u2066"} {
		if strings.Contains(got, bad) {
			t.Errorf("the page carries %q raw", bad)
		}
	}
	for _, shown := range []string{"&lt;script&gt;", "202E⟩", "2066⟩"} {
		if !strings.Contains(got, shown) {
			t.Errorf("the page does not show %q: the hostile strings should be visible, escaped", shown)
		}
	}
}

func TestClean(t *testing.T) {
	for in, want := range map[string]string{
		"plain":                "plain",
		"a\nb\tc":              "a b c",
		"x\u202Ey":             "x⟨U+202E⟩y",
		"\x1b[31mred":          "⟨U+001B⟩[31mred",
		strings.Repeat("é", 5): "éééé…",
	} {
		n := 100
		if in == strings.Repeat("é", 5) {
			n = 4
		}
		if got := clean(in, n); got != want {
			t.Errorf("clean(%q, %d) = %q, want %q", in, n, got, want)
		}
	}
}
