package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A run of some steps (-only) rewrites their rows and keeps the rest, with
// their commands and every hand-written section, and a second run keeps
// them again unchanged.
func TestReportKeepsWhatItDidNotRerun(t *testing.T) {
	path := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	r := &runner{rounds: 7, benchFor: "1s"}
	first := []figure{
		{Name: "Lock cycle", Figure: "100 µs", Ratio: "1.00×", Spread: "0.9–1.1", Verdict: "met", Command: "go test lock"},
		{Name: "One pane", Figure: "9 ms", Ratio: "1.50×", Spread: "1.2–1.8", Verdict: "missed", Command: "go test pane"},
	}
	text := report(first, previous{}, "15", r)
	text = strings.Replace(text, "\n## Commands", "\n## A pass by hand (issue 26)\n\nWhat was measured, and why.\n\n## Commands", 1)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}

	prev, err := readPrevious(path)
	if err != nil {
		t.Fatal(err)
	}
	again := report([]figure{{Name: "One pane", Figure: "7 ms", Ratio: "1.20×", Spread: "1.1–1.3", Verdict: "met", Command: "go test pane2"}}, prev, "15", r)
	for _, want := range []string{
		"| Lock cycle | 100 µs |  | 1.00× | 0.9–1.1 (not rerun: the ",
		"| One pane | 7 ms |  | 1.20× | 1.1–1.3 |",
		"## A pass by hand (issue 26)\n\nWhat was measured, and why.\n",
		"- Lock cycle\n  - project: `go test lock`\n",
		"- One pane\n  - project: `go test pane2`\n",
	} {
		if !strings.Contains(again, want) {
			t.Errorf("the second report lacks %q:\n%s", want, again)
		}
	}
	if strings.Contains(again, "9 ms") || strings.Contains(again, "go test pane`") {
		t.Errorf("the second report kept the rerun row's old figure or command:\n%s", again)
	}
	if n := strings.Count(again, "## A pass by hand"); n != 1 {
		t.Errorf("the hand-written section appears %d times", n)
	}

	// A third run of nothing keeps both rows, each marked once.
	if err := os.WriteFile(path, []byte(again), 0o644); err != nil {
		t.Fatal(err)
	}
	prev, err = readPrevious(path)
	if err != nil {
		t.Fatal(err)
	}
	third := report(nil, prev, "15", r)
	if n := strings.Count(third, "not rerun"); n != 2 {
		t.Errorf("%d marks of not rerun, want 2 (one a row):\n%s", n, third)
	}
}

// A figure new to the table goes beside its step's others, not last.
func TestReportPlacesNewRowsBesideTheirStep(t *testing.T) {
	p := previous{rows: []string{
		"| Lock cycle | 1 | | | 0.9–1.1 | | met |",
		"| One pane | 2 | | | 1.0–2.0 | | met |",
	}, commands: map[string]string{}, written: "2026-11-26 06:47 UTC"}
	rows, _ := p.merge([]figure{{Name: "Lock cycle", Figure: "3"}, {Name: "  pinned reference", Figure: "4"}})
	var names []string
	for _, r := range rows {
		names = append(names, rowName(r))
	}
	if want := []string{"Lock cycle", "pinned reference", "One pane"}; !slices.Equal(names, want) {
		t.Errorf("rows %q, want %q", names, want)
	}
}

// A retired row (no step writes it) is dropped with its command at the
// next run, whatever steps that run reruns.
func TestReportDropsRetiredRows(t *testing.T) {
	var name string
	for n := range retired {
		name = n
	}
	path := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	r := &runner{rounds: 7, benchFor: "1s"}
	first := []figure{
		{Name: "Lock cycle", Figure: "100 µs", Ratio: "1.00×", Spread: "0.9–1.1", Verdict: "met", Command: "go test lock"},
		{Name: name, Figure: "21.95 ms", Ratio: "1.80×", Spread: "1.2–1.9", Verdict: "missed", Command: "go test retired"},
	}
	if err := os.WriteFile(path, []byte(report(first, previous{}, "15", r)), 0o644); err != nil {
		t.Fatal(err)
	}
	prev, err := readPrevious(path)
	if err != nil {
		t.Fatal(err)
	}
	again := report(nil, prev, "15", r)
	if strings.Contains(again, name) || strings.Contains(again, "go test retired") {
		t.Errorf("the retired row or its command is still there:\n%s", again)
	}
	if !strings.Contains(again, "| Lock cycle | 100 µs |") {
		t.Errorf("the other row is gone:\n%s", again)
	}
}

// A row whose name carries a measured count in parentheses (the scenario's
// seconds, the simulator's goroutines) is the same row when the count
// changes: the new run replaces it, rather than keeping the old one beside
// it, marked not rerun. Names that differ outside parentheses stay apart.
func TestReportReplacesARowWhoseCountChanged(t *testing.T) {
	p := previous{rows: []string{
		"| Monitor poll (Inspect), 100 held locks | 1 | | | 0.9–1.1 | | — |",
		"| Monitor poll (Inspect), 1000 held locks | 2 | | | 0.9–1.1 | | met |",
		"|   scenario fole: jobs under lease locks (18 resources, 28 goroutines, 34 s) | 3 | | | — | | met |",
	}, commands: map[string]string{}, written: "2026-11-26 06:47 UTC"}
	rows, _ := p.merge([]figure{
		{Name: "Monitor poll (Inspect), 100 held locks", Figure: "4"},
		{Name: "  scenario fole: jobs under lease locks (18 resources, 28 goroutines, 30 s)", Figure: "5"},
	})
	want := []string{
		"| Monitor poll (Inspect), 100 held locks | 4 |  |  | — |  |  |",
		"| Monitor poll (Inspect), 1000 held locks | 2 | | | 0.9–1.1 (not rerun: the 2026-11-26 06:47 UTC run) | | met |",
		"|   scenario fole: jobs under lease locks (18 resources, 28 goroutines, 30 s) | 5 |  |  | — |  |  |",
	}
	if !slices.Equal(rows, want) {
		t.Errorf("rows\n%s\nwant\n%s", strings.Join(rows, "\n"), strings.Join(want, "\n"))
	}
}

// Two rows of one name (a sub-row under two steps) are replaced in turn,
// each by the figure of that name in the same place, and stay where they
// were.
func TestReportReplacesRowsOfOneNameInTurn(t *testing.T) {
	p := previous{rows: []string{
		"| Lock cycle | 1 | | | — | | — |",
		"|   against the pinned reference | 2 | | | — | | — |",
		"| Contended | 3 | | | — | | — |",
		"|   against the pinned reference | 4 | | | — | | — |",
	}, commands: map[string]string{}, written: "2026-11-26 06:47 UTC"}
	rows, _ := p.merge([]figure{
		{Name: "Lock cycle", Figure: "5"}, {Name: "  against the pinned reference", Figure: "6"},
		{Name: "Contended", Figure: "7"}, {Name: "  against the pinned reference", Figure: "8"},
	})
	var figures []string
	for _, r := range rows {
		figures = append(figures, strings.TrimSpace(strings.Split(r, "|")[2]))
	}
	if want := []string{"5", "6", "7", "8"}; !slices.Equal(figures, want) {
		t.Errorf("figures %q, want %q:\n%s", figures, want, strings.Join(rows, "\n"))
	}
}
