package htmlreport

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"
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
	for _, bad := range []string{"<script", "<img", "<svg onload", "onerror=\"", "\u202E", "\u2066"} {
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

// Review feeds the lanes from the report's own reading of the frames: the
// same timeline as Build's reading of its own, over the whole span and a
// part of it.
func TestReviewSameAsBuild(t *testing.T) {
	r := recorded(t, false)
	for _, span := range [][2]time.Time{{}, {t0.Add(5 * time.Second), t0.Add(21 * time.Second)}} {
		rep, tl, err := Review(r, "", span[0], span[1])
		if err != nil {
			t.Fatal(err)
		}
		again, err := Build(r, rep)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(tl, again) {
			t.Errorf("span %v: Review's timeline differs from Build's:\n%+v\n%+v", span, tl, again)
		}
		if len(tl.Queue) != rep.Snapshots || len(tl.Lanes) == 0 {
			t.Errorf("span %v: %d queue points for %d snapshots, %d lanes", span, len(tl.Queue), rep.Snapshots, len(tl.Lanes))
		}
	}
}
