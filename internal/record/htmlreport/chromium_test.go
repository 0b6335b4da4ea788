package htmlreport

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/locktop/locktop/internal/testenv/headless"
)

// TestPileUpInChromium opens the report of a recorded pile-up in headless
// Chromium: no console errors, the lanes and marks the recording implies
// in the DOM, a screenshot beside the page.
func TestPileUpInChromium(t *testing.T) {
	b := headless.New(t)
	dir := t.TempDir()
	b.Open(t, dir, "pileup.html", rendered(t, recorded(t, false)))

	counts := map[string]int{
		"g.lane":              3, // AGENT 7, AGENT 9, the lease map:m1
		".bar.hold":           5, // 100 then 201 on AGENT 7, 300 on AGENT 9, worker-1 then worker-2 on the lease
		".bar.wait.o-granted": 1, // 201 behind 100
		".bar.wait.o-gave-up": 2, // 202 left the queue; 301 left with its holder
		".bar.root":           2, // 100 and 300 blocked the episodes' waiters
		".episode":            2,
		".mark.outage":        1, // Redis, 20 s to 23 s
		".mark.lease":         2, // worker-1's lease expired, then worker-2 recovered it
		"#queue path.area":    1,
		"#waits tr a":         3,
		"#holders tr a":       2,
	}
	for sel, want := range counts {
		n := headless.Eval[int](t, b, `document.querySelectorAll(`+jsString(sel)+`).length`)
		if n != want {
			t.Errorf("%s: %d elements, want %d", sel, n, want)
		}
	}
	first := headless.Eval[string](t, b, `document.querySelector("#lane-1 .key").firstChild.textContent`)
	if first != "AGENT 7" {
		t.Errorf("the first lane is %q, want AGENT 7 (the most waited-for key)", first)
	}
	leaseOutcome := headless.Eval[string](t, b, `[...document.querySelectorAll(".lane.k-lease .bar.hold")].map(e => e.classList[2]).join(" ")`)
	if !strings.Contains(leaseOutcome, "o-expired") && !strings.Contains(leaseOutcome, "o-recovered") {
		t.Errorf("the lease's holds end %q: want the first expired or recovered", leaseOutcome)
	}
	// A table's link moves to the key's lane, which :target highlights.
	if err := chromedp.Do(b.Ctx, chromedp.Click(chromedp.CSS(`#waits tr a`))); err != nil {
		t.Fatal(err)
	}
	target := headless.Eval[string](t, b, `location.hash`)
	if target != "#lane-1" {
		t.Errorf("the longest wait links to %q, want #lane-1", target)
	}

	shot := filepath.Join(dir, "pileup.png")
	b.Screenshot(t, shot)
	t.Logf("screenshot: %s", shot)
	if errs := b.Errors(); len(errs) > 0 {
		t.Errorf("the page reported errors:\n%s", strings.Join(errs, "\n"))
	}
}

// TestHostileRecordingInert opens the report of a recording whose
// application names, queries and a lease owner carry <script>, an
// attribute break-out with onerror, and bidi overrides: none of them is
// active (no script ran, no element was injected, no bidi control is in
// the text), and all of them are shown, escaped.
func TestHostileRecordingInert(t *testing.T) {
	b := headless.New(t)
	b.Open(t, t.TempDir(), "hostile.html", rendered(t, recorded(t, true)))

	pwned := headless.Eval[string](t, b, `String(window.__pwned)`)
	if pwned != "undefined" {
		t.Errorf("a script from the recording ran: window.__pwned = %q", pwned)
	}
	injected := headless.Eval[int](t, b, `document.querySelectorAll("script, img, iframe, object, embed, [onerror], [onload], [src]").length`)
	if injected != 0 {
		t.Errorf("%d elements injected by the recording's strings", injected)
	}
	bidi := headless.Eval[bool](t, b, `/[\u202A-\u202E\u2066-\u2069\u200E\u200F\u061C]/.test(document.documentElement.textContent)`)
	if bidi {
		t.Error("a bidi control from the recording is in the page's text")
	}
	shown := headless.Eval[bool](t, b, `document.documentElement.textContent.includes('<script>window.__pwned') && document.documentElement.textContent.includes('U+202E')`)
	if !shown {
		t.Error("the hostile strings are not shown as text")
	}
	if errs := b.Errors(); len(errs) > 0 {
		t.Errorf("the page reported errors (a blocked script or image would):\n%s", strings.Join(errs, "\n"))
	}
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}
