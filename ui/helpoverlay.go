package ui

import (
	"strings"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
)

// helpOverlay is the full help: every key of the screen, from the keymaps
// of its components (bubbles/help), and what the screen's colours, signs
// and filter forms mean. It covers the body and scrolls when it is longer.
type helpOverlay struct {
	st    *Styles
	keys  *KeyMap
	box   scrollBox
	help  help.Model
	short []key.Binding
}

func newHelpOverlay(st *Styles, k *KeyMap, screen help.KeyMap) *helpOverlay {
	h := help.New()
	h.Styles = st.Help
	o := &helpOverlay{st: st, keys: k, box: newScrollBox(st, k), help: h,
		short: []key.Binding{k.Up, k.Down, with(k.Close, "close"), with(k.Help, "close"), k.Quit}}
	o.box.set("Keys", func(w int) string { return o.render(screen.FullHelp(), w) })
	return o
}

// SetSize sets the box's size (the body of the screen).
func (o *helpOverlay) SetSize(w, h int) { o.box.SetSize(w, h) }

// View renders the box.
func (o *helpOverlay) View() string { return o.box.View() }

// Place covers the body.
func (o *helpOverlay) Place() placement { return placeBody }

// ShortHelp is the overlay's keys, for the footer.
func (o *helpOverlay) ShortHelp() []key.Binding { return o.short }

// FullHelp is ShortHelp in one column.
func (o *helpOverlay) FullHelp() [][]key.Binding { return [][]key.Binding{o.short} }

// Update scrolls, or closes on esc or ?.
func (o *helpOverlay) Update(msg tea.Msg) (bool, tea.Cmd) {
	if k, ok := msg.(tea.KeyPressMsg); ok && (key.Matches(k, o.keys.Close) || key.Matches(k, o.keys.Help)) {
		return false, nil
	}
	return true, o.box.Update(msg)
}

// render lays the key groups out in as many rows of columns as the width
// needs (bubbles/help drops a column that does not fit), then the legend,
// wrapped to the width.
func (o *helpOverlay) render(groups [][]key.Binding, w int) string {
	o.help.SetWidth(0) // rows are fitted here; no column may be dropped
	var rows []string
	var row [][]key.Binding
	for _, g := range groups {
		if len(row) > 0 && lipgloss.Width(o.help.FullHelpView(append(row[:len(row):len(row)], g))) > w {
			rows = append(rows, o.help.FullHelpView(row))
			row = nil
		}
		row = append(row, g)
	}
	if len(row) > 0 {
		rows = append(rows, o.help.FullHelpView(row))
	}
	k := o.keys
	legend := []string{
		o.st.Section.Render("Reading the table"),
		"Each key shows its holder first, then its waiters in queue order (by pg_locks.waitstart). " +
			"BLOCKED BY names the holders only.",
		"Held times are \"≥\": PostgreSQL does not record when a lock was granted.",
		"Waits turn " + o.st.TimeWarn.Render("yellow from "+fmtDur(waitWarn)) + " and " +
			o.st.TimeCrit.Render("red from "+fmtDur(waitCrit)) + " (! and !! without colour).",
		"by kind: each kind's holders·waiters (redis 3·4w: 3 held, 4 waiting); by database, the same per database " +
			"when locks are in more than one. lock waits/s: the waits that began " +
			"per second (new since the previous refresh), not how many wait, which follows it (\"8 waiting now\").",
		"\"idle in tx\": the holder's session is idle inside a transaction, holding its locks while doing nothing.",
		o.st.Root.Render("ROOT") + ": a root blocker, a holder that waits for nothing while others wait behind it; " +
			"its BLOCKED BY cell says what it costs: \"5w 2m30s\" is 5 sessions waiting behind it, directly or " +
			"behind its waiters, 2m30s waited in all. The costliest root's keys come first (" + hint(k.Sort) +
			" sorts otherwise); " + hint(k.Forest) + " draws the whole wait-for forest, across objects and kinds.",
		"DEADLOCK: a cycle of waits seen in two polls in a row, across PostgreSQL, Redis and leases (a party is an " +
			"owner id where its locks carry one, else a backend): a banner while it lasts, " + hint(k.Deadlocks) +
			" for each wait; with --allow-terminate, " + hint(k.Terminate) + " there breaks it after a confirmation.",
		"Where the table is narrow, MODE uses short names for PostgreSQL's lock modes: " + shortModeLegend() +
			"; a name too long for its column is cut in the part it shares with the others (\"p308…brain-1\").",
		"",
		o.st.Section.Render("Filter (" + hint(k.Filter) + ")"),
		"Text matches the key, the application, the pid or the owner; a match keeps its whole queue.",
		"ns:AGENT 7            the key contains AGENT 7 (AGENT 71 too)",
		"ns:AGENT =7           exactly AGENT 7; so does key:\"AGENT 7\"",
		"app:NAME pid:N kind:K the application, the backend, the kind of lock",
		"database:NAME         the locks in database NAME, exactly (db:NAME too)",
		"tenant-a:2025-01-15   a hashed key's string finds its FNV-1a key",
	}
	for i, l := range legend {
		legend[i] = strings.Join(wrap(l, w), "\n")
	}
	return strings.Join(rows, "\n\n") + "\n\n" + strings.Join(legend, "\n")
}
