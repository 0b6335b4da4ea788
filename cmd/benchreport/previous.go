package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
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

// rowName is a table row's first cell, trimmed.
func rowName(row string) string {
	cells := strings.Split(row, "|")
	if len(cells) < 2 {
		return ""
	}
	return strings.TrimSpace(cells[1])
}

// merge returns the table's rows: the previous report's, in their order,
// each replaced by this run's figure of the same name; a previous row with
// no such figure is kept and marked not rerun; this run's new figures come
// last. It returns too the commands of the rows kept.
func (p previous) merge(figs []figure) (rows, commands []string) {
	fresh := map[string]figure{}
	for _, f := range figs {
		fresh[strings.TrimSpace(f.Name)] = f
	}
	used := map[string]bool{}
	for _, row := range p.rows {
		name := rowName(row)
		if f, ok := fresh[name]; ok {
			rows = append(rows, f.row())
			used[name] = true
			continue
		}
		rows = append(rows, p.notRerun(row))
		if c, ok := p.commands[name]; ok {
			commands = append(commands, c)
		}
	}
	for _, f := range figs {
		if !used[strings.TrimSpace(f.Name)] {
			rows = append(rows, f.row())
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
