package recording

import (
	"encoding/json"

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
