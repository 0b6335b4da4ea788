package ui

import (
	"strconv"
	"strings"

	"charm.land/lipgloss/v2"

	"github.com/locktop/locktop/model"
)

// Outcomes the dashboard itself reports, beside the simulator's: what it
// sees change between snapshots (monitor only), and its own notes.
const (
	outcomeWaits    model.Outcome = "waits"
	outcomeGranted  model.Outcome = "granted"
	outcomeReleased model.Outcome = "released"
	outcomeLeft     model.Outcome = "left"
	outcomeInfo     model.Outcome = "info"
)

// eventLog keeps the last events and shows the newest at the bottom.
type eventLog struct {
	st     *Styles
	width  int
	height int

	ring  []model.Event
	next  int // where the next event goes once the ring is full
	total int64
}

// eventCapacity is how many events the log keeps.
const eventCapacity = 500

// SetSize sets the cells the log may use.
func (e *eventLog) SetSize(w, h int) { e.width, e.height = w, h }

// Add appends events, dropping the oldest beyond the capacity.
func (e *eventLog) Add(evs ...model.Event) {
	for _, ev := range evs {
		e.total++
		if len(e.ring) < eventCapacity {
			e.ring = append(e.ring, ev)
			continue
		}
		e.ring[e.next] = ev
		e.next = (e.next + 1) % eventCapacity
	}
}

// last returns up to n events, oldest first.
func (e *eventLog) last(n int) []model.Event {
	n = min(n, len(e.ring))
	out := make([]model.Event, 0, n)
	start := len(e.ring) - n
	if len(e.ring) == eventCapacity {
		start = e.next + eventCapacity - n
	}
	for i := range n {
		out = append(out, e.ring[(start+i)%len(e.ring)])
	}
	return out
}

// View renders the title and the newest events that fit.
func (e *eventLog) View() string {
	if e.width <= 0 || e.height <= 0 {
		return ""
	}
	lines := []string{rule(e.st, "Events", fmtCount(e.total)+" so far", e.width)}
	evs := e.last(e.height - 1)
	if len(evs) == 0 {
		lines = append(lines, e.st.Dim.Render("  nothing yet"))
	}
	for i := range evs {
		lines = append(lines, e.render(&evs[i]))
	}
	return fitBlock(lines, e.width, e.height)
}

func (e *eventLog) render(ev *model.Event) string {
	var b strings.Builder
	b.WriteString(e.st.Dim.Render(ev.Time.Format("15:04:05")))
	b.WriteByte(' ')
	b.WriteString(cell(Sanitize(ev.Worker), 9))
	b.WriteByte(' ')
	b.WriteString(e.outcomeStyle(ev.Outcome).Render(cell(string(ev.Outcome), 9)))
	b.WriteByte(' ')
	var parts []string
	if ev.Key != "" {
		parts = append(parts, Sanitize(ev.Key))
	}
	if ev.Wait > 0 {
		parts = append(parts, "after "+fmtDur(ev.Wait))
	}
	if ev.PID != 0 {
		parts = append(parts, "pid "+strconv.Itoa(int(ev.PID)))
	}
	if ev.Detail != "" {
		parts = append(parts, Sanitize(ev.Detail))
	}
	b.WriteString(strings.Join(parts, " · "))
	return b.String()
}

func (e *eventLog) outcomeStyle(o model.Outcome) lipgloss.Style {
	switch o {
	case model.OutcomeAcquired, outcomeGranted:
		return e.st.Holds
	case model.OutcomeTimeout, model.OutcomePhantom, model.OutcomeCanceled, outcomeLeft, outcomeWaits:
		return e.st.Waits
	case model.OutcomeReentrant:
		return e.st.Note
	case model.OutcomeError, model.OutcomeLost, model.OutcomeViolation:
		return e.st.Bad
	case outcomeInfo:
		return e.st.Status
	}
	return e.st.Dim
}
