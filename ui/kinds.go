package ui

import (
	"strings"
	"time"

	"github.com/locktop/locktop/model"
)

// kindView is how the dashboard shows one kind of lock: its word in the
// KIND column and the details, and the time cell of a holder at the
// snapshot's time (a waiter's is always how long it has waited). A kind
// without an entry shows its Kind string and the held time; adding a kind
// is adding a line here (and its details in kindDetails).
type kindView struct {
	word  string
	short string // where the table is narrow
	held  func(l *model.Lock, now time.Time) string
}

var kindViews = map[model.Kind]kindView{
	model.KindAdvisory:    {"advisory", "adv", heldAtLeast},
	model.KindRow:         {"row", "row", heldAtLeast},
	model.KindTransaction: {"xact", "xact", heldAtLeast},
	model.KindRelation:    {"relation", "rel", heldAtLeast},
	model.KindOther:       {"other", "other", heldAtLeast},
	model.KindRedis:       {"redis", "redis", leaseLeft("ttl ")},
	model.KindLease:       {"lease", "lease", leaseLeft("lease ")},
}

// kindName is the kind's word on screen.
func kindName(k model.Kind) string {
	if v, ok := kindViews[k]; ok {
		return v.word
	}
	return string(k)
}

// kindShort is the kind's word where the table is narrow.
func kindShort(k model.Kind) string {
	if v, ok := kindViews[k]; ok {
		return v.short
	}
	return string(k)
}

// heldAtLeast is a held time as a lower bound: the server does not record
// when a lock was granted (see model.Lock.HeldSince). Beside it, the age of
// the holder's transaction ("in tx 1m16s"), which a transaction's lock
// cannot be older than: the truth lies between the two.
func heldAtLeast(l *model.Lock, now time.Time) string {
	s := ""
	if !l.HeldSince.IsZero() {
		s = "≥" + fmtDur(l.Held(now))
	}
	if tx := txAge(l, now); tx != "" {
		s = strings.TrimSpace(s + " in tx " + tx)
	}
	return s
}

// txAge is the age of a PostgreSQL holder's transaction at now; "" outside
// a transaction.
func txAge(l *model.Lock, now time.Time) string {
	if !l.Kind.PG() || l.Session().XactStart.IsZero() {
		return ""
	}
	return fmtDur(now.Sub(l.Session().XactStart))
}

// leaseLeft is the time a lease or a TTL has left, or how long ago it
// passed.
func leaseLeft(prefix string) func(*model.Lock, time.Time) string {
	return func(l *model.Lock, now time.Time) string {
		if l.Expires.IsZero() {
			return ""
		}
		left := l.Left(now)
		if left < 0 {
			if l.Stale {
				return "stale " + fmtDur(-left) // passed, no heartbeat: recoverable
			}
			return "passed " + fmtDur(-left)
		}
		return prefix + fmtDur(left)
	}
}

// lockTime is the time cell at now: how long a waiter has waited (graded),
// and for a holder what its kind says (held at least, lease or TTL left).
func lockTime(l *model.Lock, now time.Time) (string, severity) {
	if !l.Granted {
		w := l.Waited(now)
		return fmtDur(w), waitSeverity(w)
	}
	if v, ok := kindViews[l.Kind]; ok {
		sev := sevNone
		if l.Stale {
			sev = sevCrit
		}
		return v.held(l, now), sev
	}
	return heldAtLeast(l, now), sevNone
}

// idleInTx names a session idle inside a transaction ("idle in tx", or
// "idle in tx, aborted"): a holder in that state keeps its locks while
// doing nothing, the classic cause of a queue that never moves. "" for any
// other state.
func idleInTx(l *model.Lock) string {
	switch {
	case !strings.HasPrefix(l.Session().State, "idle in transaction"):
		return ""
	case strings.Contains(l.Session().State, "aborted"):
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
	case "exclusive": // a Redis session mutex
		return "excl"
	}
	return strings.TrimSuffix(mode, "Lock")
}

// shortModes are PostgreSQL's lock modes in short, for a MODE column
// that has no room for the whole names. The abbreviations follow the
// words of the docs' table-level lock modes (ACCESS SHARE, ROW
// EXCLUSIVE, …): Acc, Row, Shr, Upd, Excl; the help lists them. SHARE and EXCLUSIVE
// keep the words every advisory lock shows.
var shortModes = map[string]string{
	"AccessShareLock":          "AccShr",
	"RowShareLock":             "RowShr",
	"RowExclusiveLock":         "RowExcl",
	"ShareUpdateExclusiveLock": "ShrUpdExcl",
	"ShareLock":                "share",
	"ShareRowExclusiveLock":    "ShrRowExcl",
	"ExclusiveLock":            "excl",
	"AccessExclusiveLock":      "AccExcl",
}

// shortMode is mode in at most ten cells: PostgreSQL's modes by
// shortModes, the others as modeText has them (they are short).
func shortMode(mode string) string {
	if s, ok := shortModes[mode]; ok {
		return s
	}
	return modeText(mode)
}

// shortModeLegend lists the short names for the help, in the docs' order
// of the table-level modes.
func shortModeLegend() string {
	var out []string
	for _, m := range []string{"AccessShareLock", "RowShareLock", "RowExclusiveLock", "ShareUpdateExclusiveLock",
		"ShareRowExclusiveLock", "AccessExclusiveLock"} {
		out = append(out, shortModes[m]+" "+modeText(m))
	}
	return strings.Join(out, ", ")
}
