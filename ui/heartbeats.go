package ui

import (
	"time"

	"github.com/locktop/locktop/model"
)

// heartbeats keeps the last heartbeats seen of each lease holder, for its
// details: a lease's history is what the polls saw of it, since the table
// keeps only the newest heartbeat.
type heartbeats map[beatKey][]time.Time

type beatKey struct{ name, owner string }

// beatHistory is how many heartbeats a holder keeps.
const beatHistory = 8

// note records the heartbeats of the lease holders in s, and forgets the
// holders s's source no longer shows (they were released).
func (h *heartbeats) note(s *model.Snapshot) {
	if *h == nil {
		*h = heartbeats{}
	}
	seen := false
	live := map[beatKey]bool{}
	for i := range s.Locks {
		l := &s.Locks[i]
		if l.Kind != model.KindLease || !l.Granted || l.Heartbeat.IsZero() {
			continue
		}
		seen = true
		k := beatKey{l.Name, l.Owner}
		live[k] = true
		b := (*h)[k]
		if n := len(b); n == 0 || !b[n-1].Equal(l.Heartbeat) {
			b = append(b, l.Heartbeat)
			if len(b) > beatHistory {
				b = b[len(b)-beatHistory:]
			}
			(*h)[k] = b
		}
	}
	if !seen && !hasKind(s, model.KindLease) {
		return // another source's snapshot: leave the leases alone
	}
	for k := range *h {
		if !live[k] {
			delete(*h, k)
		}
	}
}

// of returns the heartbeats seen of l's holder, oldest first.
func (h heartbeats) of(l *model.Lock) []time.Time {
	return h[beatKey{l.Name, l.Owner}]
}

func hasKind(s *model.Snapshot, k model.Kind) bool {
	for i := range s.Locks {
		if s.Locks[i].Kind == k {
			return true
		}
	}
	return false
}
