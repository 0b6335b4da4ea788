package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/locktop/locktop/internal/testenv/headless"
)

// TestReportHTMLLive renders the report of a pile-up recorded from a real
// server (a holds AGENT 7100, b queues behind it and is granted) with
// --html and opens it in headless Chromium.
func TestReportHTMLLive(t *testing.T) {
	path, _, _ := liveRecording(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "report.html")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"report", path, "--html", out}, &stdout, &stderr); code != exitOK || stdout.Len() != 0 {
		t.Fatalf("report --html: exit %d, stdout %q: %s", code, stdout.String(), stderr.String())
	}
	page, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	b := headless.New(t)
	b.Open(t, dir, "opened.html", page)
	lanes := headless.Eval[string](t, b, `[...document.querySelectorAll("g.lane .key")].map(e => e.firstChild.textContent).join("|")`)
	if lanes != "AGENT 7100|AGENT 7200" {
		t.Errorf("lanes %q, want AGENT 7100 (waited for) then AGENT 7200", lanes)
	}
	for sel, want := range map[string]int{"#lane-1 .bar.wait.o-granted": 1, "#lane-1 .bar.hold": 2, "#lane-1 .bar.root": 1, ".episode": 1} {
		if n := headless.Eval[int](t, b, `document.querySelectorAll("`+sel+`").length`); n != want {
			t.Errorf("%s: %d, want %d", sel, n, want)
		}
	}
	b.Screenshot(t, filepath.Join(dir, "report.png"))
	if errs := b.Errors(); len(errs) > 0 {
		t.Errorf("the page reported errors:\n%s", strings.Join(errs, "\n"))
	}

	// --json and --html together, and a file that cannot be written: one
	// line each, non-zero.
	for _, args := range [][]string{{"report", path, "--json", "--html", out}, {"report", path, "--html", filepath.Join(dir, "no", "such", "dir.html")}} {
		stdout.Reset()
		stderr.Reset()
		if code := run(args, &stdout, &stderr); code == exitOK || strings.Count(stderr.String(), "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr.String())
		}
	}
}
