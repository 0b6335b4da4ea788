package recording

import (
	"encoding/json"
	"slices"

	"github.com/locktop/locktop/model"
)

// stable returns the lock as stored: its JSON. model.Lock keeps absolute
// times only (how long a lock waited or was held is computed from a
// snapshot's time), so a lock that did not change has the same bytes in
// every snapshot, which is what lets a delta copy it instead of storing it
// again.
func stable(l *model.Lock) ([]byte, error) { return json.Marshal(l) }

// unstable reads a stored lock back.
func unstable(b []byte) (model.Lock, error) {
	var l model.Lock
	if len(b) == 0 || b[0] != '{' {
		return l, errBadLock
	}
	err := json.Unmarshal(b, &l)
	return l, err
}

// encodeLocks returns the locks as stored, reusing the bytes of the
// source's previous record for a lock that did not change at its place:
// at rest every lock is one that did not change, and encoding each again
// was most of a collector's time per target (a JSON encode per lock per
// poll). last and prev are the previous record's locks and their bytes.
func encodeLocks(locks, last []model.Lock, prev []string) ([]string, error) {
	out := make([]string, len(locks))
	for i := range locks {
		if i < len(last) && i < len(prev) && sameLock(&locks[i], &last[i]) {
			out[i] = prev[i]
			continue
		}
		b, err := stable(&locks[i])
		if err != nil {
			return nil, err
		}
		out[i] = string(b)
	}
	return out, nil
}

// sameLock reports whether a and b are stored as the same bytes: every
// field equal (times by ==: the same instant in another location is
// another encoding, so it is encoded again). TestSameLockSeesEveryField
// fails when a field is added to model.Lock and not here.
func sameLock(a, b *model.Lock) bool {
	return a.Kind == b.Kind && a.PID == b.PID && a.Database == b.Database && sameBackend(a.Backend, b.Backend) &&
		a.Mode == b.Mode && a.Granted == b.Granted &&
		a.Namespace == b.Namespace && a.EntityID == b.EntityID && a.Pair == b.Pair &&
		a.LockType == b.LockType && a.Relation == b.Relation && a.Row == b.Row && a.Object == b.Object &&
		a.RelationOID == b.RelationOID && a.Name == b.Name && a.WaitStart == b.WaitStart &&
		a.HeldSince == b.HeldSince && a.Expires == b.Expires && a.Heartbeat == b.Heartbeat &&
		slices.Equal(a.BlockedBy, b.BlockedBy) && slices.Equal(a.BlockedByOwners, b.BlockedByOwners) &&
		a.QueuePos == b.QueuePos && a.Owner == b.Owner && a.Token == b.Token && a.Fence == b.Fence &&
		a.Stale == b.Stale && a.Source == b.Source && a.Server == b.Server
}

// sameBackend reports whether two rows' sessions are stored as the same
// bytes: both absent (a row without one stores none of its fields), or
// equal field by field (each poll has new values; the same one, mostly,
// for the rows of one session).
func sameBackend(a, b *model.Backend) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a == b || *a == *b
}
