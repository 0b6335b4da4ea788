package ui

import "charm.land/bubbles/v2/key"

// KeyMap is every key the dashboard answers to. The footer and the help
// overlay are generated from it, so a key that is not here does not exist.
type KeyMap struct {
	// Always there: quit, help, pause, refresh now and its interval.
	Quit    key.Binding
	Help    key.Binding
	Pause   key.Binding
	Refresh key.Binding
	Faster  key.Binding
	Slower  key.Binding

	// The lock table: move, open the details, filter, sort.
	Up       key.Binding
	Down     key.Binding
	PageUp   key.Binding
	PageDown key.Binding
	Top      key.Binding
	Bottom   key.Binding
	Details  key.Binding
	Filter   key.Binding
	Sort     key.Binding

	// The simulator's controls, enabled only with a simulator.
	Scenario    key.Binding
	RatesUp     key.Binding
	RatesDown   key.Binding
	WorkersUp   key.Binding
	WorkersDown key.Binding
	Locks       key.Binding
	Fault       key.Binding

	// Terminate ends the selected backend, enabled only with
	// --allow-terminate, and always asks first.
	Terminate key.Binding

	// Keys of the overlays and dialogs: close one, answer the
	// confirmation, pick from a list.
	Close   key.Binding
	Confirm key.Binding
	Cancel  key.Binding
	Choose  key.Binding
}

// DefaultKeyMap returns the keys. Simulator keys are enabled with a
// simulator, Terminate with --allow-terminate (see setAvailable).
func DefaultKeyMap() KeyMap {
	b := func(help, desc string, keys ...string) key.Binding {
		return key.NewBinding(key.WithKeys(keys...), key.WithHelp(help, desc))
	}
	return KeyMap{
		Quit:    b("q", "quit", "q", "ctrl+c"),
		Help:    b("?", "help", "?"),
		Pause:   b("space", "pause/resume", "space", "p"),
		Refresh: b("r", "refresh now", "r"),
		Faster:  b(">", "refresh faster", ">", "."),
		Slower:  b("<", "refresh slower", "<", ","),

		Up:       b("↑/k", "up", "up", "k"),
		Down:     b("↓/j", "down", "down", "j"),
		PageUp:   b("pgup", "page up", "pgup", "ctrl+b"),
		PageDown: b("pgdn", "page down", "pgdown", "ctrl+f"),
		Top:      b("g/home", "first", "home", "g"),
		Bottom:   b("G/end", "last", "end", "G"),
		Details:  b("enter", "details", "enter"),
		Filter:   b("/", "filter", "/"),
		Sort:     b("o", "sort", "o"),

		Scenario:    b("s", "scenario", "s"),
		RatesUp:     b("+", "rates up", "+", "="),
		RatesDown:   b("-", "rates down", "-", "_"),
		WorkersUp:   b("]", "more workers", "]"),
		WorkersDown: b("[", "fewer workers", "["),
		Locks:       b("l", "locks on/off", "l"),
		Fault:       b("i", "inject fault", "i"),

		Terminate: b("T", "terminate backend", "T"),

		Close:   b("esc", "close", "esc"),
		Confirm: b("y", "yes", "y", "Y"),
		Cancel:  b("n/esc", "no", "n", "N", "esc"),
		Choose:  b("enter", "choose", "enter"),
	}
}

// setAvailable enables the keys that depend on what was given.
func (k *KeyMap) setAvailable(sim, terminate bool) {
	for _, b := range []*key.Binding{&k.Scenario, &k.RatesUp, &k.RatesDown, &k.WorkersUp, &k.WorkersDown, &k.Locks, &k.Fault} {
		b.SetEnabled(sim)
	}
	k.Terminate.SetEnabled(terminate)
}

// ShortHelp is the footer: the keys most needed, in order.
func (k KeyMap) ShortHelp() []key.Binding {
	return []key.Binding{k.Quit, k.Help, k.Pause, k.Filter, k.Sort, k.Details, k.Scenario, k.Locks, k.Faster, k.Slower}
}

// FullHelp is the help overlay, one column per group.
func (k KeyMap) FullHelp() [][]key.Binding {
	return [][]key.Binding{
		{k.Up, k.Down, k.PageUp, k.PageDown, k.Top, k.Bottom, k.Details},
		{k.Filter, k.Sort, k.Pause, k.Refresh, k.Faster, k.Slower, k.Terminate},
		{k.Scenario, k.RatesUp, k.RatesDown, k.WorkersUp, k.WorkersDown, k.Locks, k.Fault},
		{k.Help, k.Close, k.Quit},
	}
}
