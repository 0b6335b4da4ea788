package ui

import (
	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
)

// KeyMap is every key the dashboard answers to. The footer, the help
// overlay and every hint on screen are rendered from it, so a key that is
// not here does not exist, and a hint cannot say another key than the one
// that works.
type KeyMap struct {
	// Always there: quit and help.
	Quit key.Binding
	Help key.Binding

	// The refresh loop: pause, refresh now and its interval.
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
	// Forest draws who waits for whom, root blockers first.
	Forest key.Binding
	// Server shows one target at a time, in turn, then all of them again
	// (several targets only).
	Server key.Binding
	// Deadlocks opens the details of the deadlocks now (cycles of waits
	// across kinds, seen in two polls in a row).
	Deadlocks key.Binding

	// The simulator's controls, enabled only with a simulator.
	Scenario    key.Binding
	RatesUp     key.Binding
	RatesDown   key.Binding
	WorkersUp   key.Binding
	WorkersDown key.Binding
	Locks       key.Binding
	Fault       key.Binding

	// A replay's timeline: a step back or forward, seek to a time (Pause
	// plays, Faster and Slower change the speed). Enabled only in a replay.
	StepBack    key.Binding
	StepForward key.Binding
	Seek        key.Binding

	// Terminate ends the selected backend, enabled only with
	// --allow-terminate, and always asks first.
	Terminate key.Binding

	// Rewind takes the live dashboard onto the timeline of the history it
	// keeps (Options.History); Live returns to the live view. Enabled only
	// with a history.
	Rewind key.Binding
	Live   key.Binding

	// Keys of the overlays: close one (on the table: clear the filter),
	// answer the confirmation, pick from a list, keep or clear the filter
	// being typed.
	Close   key.Binding
	Confirm key.Binding
	Cancel  key.Binding
	Choose  key.Binding
	Keep    key.Binding
	Clear   key.Binding
}

// DefaultKeyMap returns the keys. Simulator keys are enabled with a
// simulator, Terminate with --allow-terminate (see setAvailable).
func DefaultKeyMap() KeyMap {
	b := func(help, desc string, keys ...string) key.Binding {
		return key.NewBinding(key.WithKeys(keys...), key.WithHelp(help, desc))
	}
	return KeyMap{
		Quit: b("q", "quit", "q", "ctrl+c"),
		Help: b("?", "help", "?"),

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
		Forest:   b("w", "wait-for forest", "w"),
		Server:   b("v", "next server", "v"),

		Deadlocks: b("D", "deadlocks", "D"),

		Scenario:    b("s", "scenario", "s"),
		RatesUp:     b("+", "rates up", "+", "="),
		RatesDown:   b("-", "rates down", "-", "_"),
		WorkersUp:   b("]", "more workers", "]"),
		WorkersDown: b("[", "fewer workers", "["),
		Locks:       b("l", "locks on/off", "l"),
		Fault:       b("i", "inject fault", "i"),

		Terminate: b("T", "terminate backend", "T"),

		Rewind: b("b", "rewind", "b"),
		Live:   b("L", "back to live", "L"),

		StepBack:    b("←", "step back", "left"),
		StepForward: b("→", "step forward", "right"),
		Seek:        b("t", "seek to a time", "t"),

		Close:   b("esc", "close", "esc"),
		Confirm: b("y", "terminate", "y", "Y"),
		Cancel:  b("n/esc", "keep it", "n", "N", "esc"),
		Choose:  b("enter", "choose", "enter"),
		Keep:    b("enter", "keep", "enter"),
		Clear:   b("esc", "clear", "esc"),
	}
}

// setAvailable enables the keys that depend on what was given.
func (k *KeyMap) setAvailable(sim, terminate bool) {
	for _, b := range k.simKeys() {
		b.SetEnabled(sim)
	}
	k.Terminate.SetEnabled(terminate)
	k.setReplay(false)
	k.Rewind.SetEnabled(false)
	k.Live.SetEnabled(false)
	k.Server.SetEnabled(false) // several targets only (setTargets)
}

// setReplay turns the refresh loop's keys into the timeline's: pause
// plays, faster and slower change the speed, refresh has nothing to do.
func (k *KeyMap) setReplay(on bool) {
	for _, b := range []*key.Binding{&k.StepBack, &k.StepForward, &k.Seek} {
		b.SetEnabled(on)
	}
	if !on {
		return
	}
	k.Refresh.SetEnabled(false)
	k.Pause = with(k.Pause, "play/pause")
	k.Faster = with(k.Faster, "faster")
	k.Slower = with(k.Slower, "slower")
}

func (k *KeyMap) simKeys() []*key.Binding {
	return []*key.Binding{&k.Scenario, &k.RatesUp, &k.RatesDown, &k.WorkersUp, &k.WorkersDown, &k.Locks, &k.Fault}
}

// ShortHelp is the footer of the main screen: the keys most needed, in
// order.
func (k KeyMap) ShortHelp() []key.Binding {
	return []key.Binding{k.Quit, k.Help, k.Live, k.Pause, k.StepBack, k.StepForward, k.Seek, k.Filter, k.Server, k.Sort, k.Details, k.Forest, k.Rewind, k.Scenario, k.Locks, k.Faster, k.Slower}
}

// FullHelp is the keys of the screen itself; the components add theirs
// (see screenKeys).
func (k KeyMap) FullHelp() [][]key.Binding {
	return [][]key.Binding{{k.Help, k.Close, k.Quit}}
}

// with returns b with another description, for an overlay whose key does
// something of its own (esc "close" in the help, "clear" on the table).
func with(b key.Binding, desc string) key.Binding {
	b.SetHelp(b.Help().Key, desc)
	return b
}

// pressed reports whether msg is one of b's keys, enabled or not (to
// explain a key that is off).
func pressed(msg tea.KeyPressMsg, b key.Binding) bool {
	s := msg.String()
	for _, k := range b.Keys() {
		if k == s {
			return true
		}
	}
	return false
}

// hint names a key for a sentence: "esc", "space".
func hint(b key.Binding) string { return b.Help().Key }

// commandMods are the modifiers that make a key another key than its
// letter. Shift is not one of them ("G" is shifted), nor are the locks.
const commandMods = tea.ModAlt | tea.ModCtrl | tea.ModMeta | tea.ModSuper | tea.ModHyper

// modified reports whether msg carries a modifier that makes it another
// key than its letter: alt+l is not l.
func modified(msg tea.KeyPressMsg) bool { return msg.Mod&commandMods != 0 }

// unmodified drops the text of a modified key, so that it matches as the
// keystroke it is ("alt+l") and never as its letter: a terminal that
// reports the text of a key with its modifiers (the kitty keyboard
// protocol's associated text) would otherwise deliver alt+l as "l", and an
// esc and a letter arriving in one read are alt and the letter.
func unmodified(msg tea.KeyPressMsg) tea.KeyPressMsg {
	if modified(msg) {
		msg.Text = ""
	}
	return msg
}
