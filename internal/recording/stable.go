package recording

import (
	"encoding/json"
	"reflect"
	"time"

	"github.com/locktop/locktop/model"
)

// derivation is a duration of model.Lock that follows from the snapshot's
// Taken and a time of the same lock: since (Taken-anchor, a wait or a hold)
// or until (anchor-Taken, what is left of a lease), never below zero, and
// zero when the anchor is.
type derivation struct {
	field, anchor string
	until         bool
}

// derivations are the durations recomputed on reading rather than stored.
// Named, not typed, so a field that model.Lock does not have (any more) is
// simply not derived: such locks are then stored whole, correct but larger.
// Add a line here when model.Lock gains a duration kept beside its
// absolute time.
var derivations = []derivation{
	{field: "Waited", anchor: "WaitStart"},
	{field: "Held", anchor: "HeldSince"},
	{field: "LeaseLeft", anchor: "LeaseExpires", until: true},
	{field: "LeaseLeft", anchor: "Expires", until: true},
	{field: "TTLLeft", anchor: "Expires", until: true},
}

// derived is a derivation resolved against model.Lock's fields.
type derived struct {
	field, anchor []int
	until         bool
}

var derivedFields = resolve(derivations)

func resolve(ds []derivation) []derived {
	t := reflect.TypeFor[model.Lock]()
	durT, timeT := reflect.TypeFor[time.Duration](), reflect.TypeFor[time.Time]()
	var out []derived
	seen := map[string]bool{}
	for _, d := range ds {
		f, ok1 := t.FieldByName(d.field)
		a, ok2 := t.FieldByName(d.anchor)
		if !ok1 || !ok2 || f.Type != durT || a.Type != timeT || seen[d.field] {
			continue
		}
		seen[d.field] = true
		out = append(out, derived{field: f.Index, anchor: a.Index, until: d.until})
	}
	return out
}

// value is what the derivation gives for the lock v at taken.
func (d derived) value(v reflect.Value, taken time.Time) time.Duration {
	at := v.FieldByIndex(d.anchor).Interface().(time.Time)
	if at.IsZero() {
		return 0
	}
	if d.until {
		return max(at.Sub(taken), 0)
	}
	return max(taken.Sub(at), 0)
}

// Lock forms: the first byte of a stored lock.
const (
	formDerived = 'd' // the derived durations are zero and recomputed on reading
	formWhole   = 'w' // stored as it was
)

// stable returns the lock as stored: its derived durations zeroed when
// every one of them follows from taken, so that a lock that did not change
// has the same bytes in every snapshot.
func stable(l *model.Lock, taken time.Time) ([]byte, error) {
	c := *l
	v := reflect.ValueOf(&c).Elem()
	form := byte(formDerived)
	for _, d := range derivedFields {
		f := v.FieldByIndex(d.field)
		if time.Duration(f.Int()) != d.value(v, taken) {
			form = formWhole
			break
		}
	}
	if form == formDerived {
		for _, d := range derivedFields {
			v.FieldByIndex(d.field).SetInt(0)
		}
	}
	js, err := json.Marshal(&c)
	if err != nil {
		return nil, err
	}
	return append([]byte{form}, js...), nil
}

// unstable reads a stored lock back as it was at taken.
func unstable(b []byte, taken time.Time) (model.Lock, error) {
	var l model.Lock
	if len(b) == 0 || (b[0] != formDerived && b[0] != formWhole) {
		return l, errBadLock
	}
	if err := json.Unmarshal(b[1:], &l); err != nil {
		return l, err
	}
	if b[0] == formDerived {
		v := reflect.ValueOf(&l).Elem()
		for _, d := range derivedFields {
			v.FieldByIndex(d.field).SetInt(int64(d.value(v, taken)))
		}
	}
	return l, nil
}
