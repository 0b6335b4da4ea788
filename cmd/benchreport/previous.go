package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"slices"
	"strings"
)

// previous is what a report keeps of the one it replaces: the rows of the
// steps this run did not rerun (-only), with their commands, and the
// hand-written sections between the table and the commands, which record
// what one issue's work measured and why (a run rewrites only its own rows).
type previous struct {
	written  string   // when the previous report was written, from its first line
	rows     []string // its table rows, in order, as written
	commands map[string]string
	sections string // the "## " sections before "## Commands", as written
}

var writtenLine = regexp.MustCompile("Written by `make bench` \\(cmd/benchreport\\) on ([^:]+:[0-9]+ UTC)")

// readPrevious reads the report at path; a missing file is an empty one.
func readPrevious(path string) (previous, error) {
	p := previous{commands: map[string]string{}}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return p, nil
	}
	if err != nil {
		return p, err
	}
	text := string(b)
	if m := writtenLine.FindStringSubmatch(text); m != nil {
		p.written = m[1]
	}
	var (
		inTable  bool
		section  strings.Builder
		where    = "head" // head, sections, commands, tail
		lastName string
	)
	for _, line := range strings.SplitAfter(text, "\n") {
		trimmed := strings.TrimRight(line, "\n")
		switch {
		case strings.HasPrefix(trimmed, "## "):
			switch trimmed {
			case "## Commands":
				where = "commands"
			case "## Reading the figures":
				where = "tail"
			default:
				if where == "head" || where == "sections" {
					where = "sections"
				}
			}
		}
		switch where {
		case "head":
			if strings.HasPrefix(trimmed, "| --- ") {
				inTable = true
				continue
			}
			if inTable && strings.HasPrefix(trimmed, "| ") {
				p.rows = append(p.rows, trimmed)
			} else if inTable && trimmed != "" {
				inTable = false
			}
		case "sections":
			section.WriteString(line)
		case "commands":
			if name, ok := strings.CutPrefix(trimmed, "- "); ok {
				lastName = name
				p.commands[name] = line
			} else if strings.HasPrefix(trimmed, "  ") && lastName != "" {
				p.commands[lastName] += line
			}
		}
	}
	p.sections = strings.TrimRight(section.String(), "\n")
	return p, nil
}

// retired are the rows no step writes any more, each with what replaced
// it: merge drops them, which it would otherwise keep for ever, marked
// not rerun, beside the rows that replaced them.
var retired = map[string]string{
	// pgsource.Inspect (a fresh Reader each poll, no held times) against the
	// bare pg_locks query: the one pane's step has measured the dashboard's
	// Monitor.Poll since 6cc8bd2 (2026-11-26), against pgbench sending its
	// own statement; Inspect alone is BenchmarkInspectMixed/ratio.
	"One pane, PostgreSQL source (pgsource.Inspect), 1,000 advisory locks + 100 row-lock waits + 1,000 Redis session keys + 1,000 leases": "One pane, PostgreSQL source (pgsource.Monitor.Poll), …",
}

// rowName is a table row's first cell, trimmed.
func rowName(row string) string {
	cells := strings.Split(row, "|")
	if len(cells) < 2 {
		return ""
	}
	return strings.TrimSpace(cells[1])
}

// countsInParens are the numbers inside a row name's parentheses.
var countsInParens = regexp.MustCompile(`\([^()]*\)`)

// rowKey is what makes two rows the same row: the name, with the numbers
// inside its parentheses left out. Those are measured counts (a
// scenario's seconds, the simulator's goroutines) that change from run to
// run; rows that differ in what they measure differ outside them
// ("Monitor poll (Inspect), 100 held locks").
func rowKey(name string) string {
	return countsInParens.ReplaceAllStringFunc(name, func(p string) string {
		return strings.Map(func(r rune) rune {
			if r >= '0' && r <= '9' {
				return '#'
			}
			return r
		}, p)
	})
}

// merge returns the table's rows: the previous report's, in their order,
// each replaced by this run's figure of the same row (rowKey; two rows of
// one name by its figures of that name, in turn); a previous row with no
// such figure is kept and marked not rerun; a figure new to the table goes
// right after this run's figure before it (a step's new row stays beside
// its step's others). It returns too the commands of the rows kept.
func (p previous) merge(figs []figure) (rows, commands []string) {
	type slot struct {
		row   string
		fresh bool
	}
	var out []slot
	at := map[string][]int{} // by rowKey, in table order: two rows of one name are matched in turn
	for _, row := range p.rows {
		if _, ok := retired[rowName(row)]; ok {
			continue
		}
		k := rowKey(rowName(row))
		at[k] = append(at[k], len(out))
		out = append(out, slot{row: row})
	}
	last := -1 // where this run's previous figure went
	for _, f := range figs {
		k := rowKey(strings.TrimSpace(f.Name))
		if is := at[k]; len(is) > 0 {
			at[k] = is[1:]
			out[is[0]] = slot{row: f.row(), fresh: true}
			last = is[0]
			continue
		}
		last++
		if last == 0 && len(out) > 0 {
			last = len(out) // a new first figure: after the kept rows
		}
		out = slices.Insert(out, last, slot{row: f.row(), fresh: true})
		for _, is := range at {
			for j, i := range is {
				if i >= last {
					is[j] = i + 1
				}
			}
		}
	}
	for _, s := range out {
		if s.fresh {
			rows = append(rows, s.row)
			continue
		}
		rows = append(rows, p.notRerun(s.row))
		if c, ok := p.commands[rowName(s.row)]; ok {
			commands = append(commands, c)
		}
	}
	return rows, commands
}

// notRerun marks a kept row's spread cell with the run it comes from,
// once.
func (p previous) notRerun(row string) string {
	cells := strings.Split(row, "|")
	if len(cells) < 8 || strings.Contains(cells[5], "not rerun") || p.written == "" {
		return row
	}
	cells[5] = fmt.Sprintf(" %s (not rerun: the %s run) ", strings.TrimSpace(cells[5]), p.written)
	return strings.Join(cells, "|")
}

// row is f as a line of the table.
func (f figure) row() string {
	sp := f.Spread
	if sp == "" {
		sp = "—"
	}
	return fmt.Sprintf("| %s | %s | %s | %s | %s | %s | %s |", f.Name, f.Figure, f.Baseline, f.Ratio, sp, f.Budget, f.Verdict)
}
