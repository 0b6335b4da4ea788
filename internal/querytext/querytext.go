package querytext

import (
	"fmt"
	"strings"

	"github.com/locktop/locktop/model"
)

// Mode is how much query text leaves the process.
type Mode int

// The modes. The zero Mode is Full, so a caller that sets nothing keeps
// today's behaviour; commands choose Normalized for a non-loopback bind.
const (
	Full       Mode = iota // the text as the server gave it
	Normalized             // every literal replaced by $n, comments dropped
	None                   // no text at all
)

// Modes are the names the --query-text flag takes, in Mode order.
var Modes = []string{"full", "normalized", "none"}

func (m Mode) String() string {
	if m < 0 || int(m) >= len(Modes) {
		return fmt.Sprintf("Mode(%d)", int(m))
	}
	return Modes[m]
}

// ParseMode reads a Mode by its name.
func ParseMode(s string) (Mode, error) {
	for i, name := range Modes {
		if s == name {
			return Mode(i), nil
		}
	}
	return Full, fmt.Errorf("query text %q: want one of %s", s, strings.Join(Modes, ", "))
}

// Apply returns q as m lets it out.
func (m Mode) Apply(q string) string {
	switch m {
	case Full:
		return q
	case Normalized:
		return Normalize(q)
	}
	return ""
}

// Snapshot applies m to every lock's query in s, in place. A Full mode
// leaves s untouched; otherwise the Locks slice is copied first, so a
// snapshot shared with the screen keeps its full text.
func (m Mode) Snapshot(s *model.Snapshot) {
	if m == Full || len(s.Locks) == 0 {
		return
	}
	locks := make([]model.Lock, len(s.Locks))
	copy(locks, s.Locks)
	// A session's rows share one model.Backend, which the screen's
	// snapshot shares too: each gets one new Backend, shared by its rows.
	applied := map[*model.Backend]*model.Backend{}
	for i := range locks {
		b := locks[i].Backend
		if b == nil || b.Query == "" {
			continue
		}
		nb, ok := applied[b]
		if !ok {
			c := *b
			c.Query = m.Apply(b.Query)
			nb = &c
			applied[b] = nb
		}
		locks[i].Backend = nb
	}
	s.Locks = locks
}
