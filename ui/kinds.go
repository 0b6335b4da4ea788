package ui

import (
	"strings"
	"time"

	"github.com/locktop/locktop/model"
)

// kindView is how the dashboard shows one kind of lock: its word in the
// KIND column and the details, and the time cell of a holder (a waiter's is
// always how long it has waited). A kind without an entry shows its Kind
// string and the held time; adding a kind is adding a line here.
type kindView struct {
	word string
	held func(l *model.Lock) string
}

var kindViews = map[model.Kind]kindView{
	model.KindAdvisory:   {"advisory", heldAtLeast},
	model.KindLeasePG:    {"lease", leaseLeft("lease ")},
	model.KindLeaseRedis: {"redis", leaseLeft("ttl ")},
}

// kindName is the kind's word on screen.
func kindName(k model.Kind) string {
	if v, ok := kindViews[k]; ok {
		return v.word
	}
	return string(k)
}

// heldAtLeast is a held time as a lower bound: the server does not record
// when an advisory lock was granted (see model.Lock.HeldSince).
func heldAtLeast(l *model.Lock) string {
	if l.HeldSince.IsZero() {
		return ""
	}
	return "≥" + fmtDur(l.Held)
}

// leaseLeft is the time a lease or a TTL has left.
func leaseLeft(prefix string) func(*model.Lock) string {
	return func(l *model.Lock) string { return prefix + fmtDur(l.LeaseLeft) }
}

// lockTime is the time cell: how long a waiter has waited (graded), and for
// a holder what its kind says (held at least, lease or TTL left).
func lockTime(l *model.Lock) (string, severity) {
	if !l.Granted {
		return fmtDur(l.Waited), waitSeverity(l.Waited)
	}
	if v, ok := kindViews[l.Kind]; ok {
		return v.held(l), sevNone
	}
	return heldAtLeast(l), sevNone
}

// idleInTx names a session idle inside a transaction ("idle in tx", or
// "idle in tx, aborted"): a holder in that state keeps its locks while
// doing nothing, the classic cause of a queue that never moves. "" for any
// other state.
func idleInTx(l *model.Lock) string {
	switch {
	case !strings.HasPrefix(l.State, "idle in transaction"):
		return ""
	case strings.Contains(l.State, "aborted"):
		return "idle in tx, aborted"
	}
	return "idle in tx"
}

// severity grades a wait against the thresholds.
type severity int

const (
	sevNone severity = iota
	sevWarn
	sevCrit
)

func waitSeverity(d time.Duration) severity {
	switch {
	case d >= waitCrit:
		return sevCrit
	case d >= waitWarn:
		return sevWarn
	}
	return sevNone
}

// mark says without colour what the colour says.
func (s severity) mark() string {
	switch s {
	case sevWarn:
		return "!"
	case sevCrit:
		return "!!"
	}
	return ""
}

func modeText(mode string) string {
	switch mode {
	case model.ModeExclusive:
		return "excl"
	case model.ModeShare:
		return "share"
	}
	return strings.TrimSuffix(mode, "Lock")
}
