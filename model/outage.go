package model

import "time"

// Outage is the snapshot a recorder keeps for a poll of source that
// failed with err: no locks, taken at the recorder's clock at, and one
// source status carrying the error, so that a replay shows the outage as
// it was and a report counts it.
func Outage(source string, err error, at time.Time) Snapshot {
	return Snapshot{Taken: at, Sources: []SourceStatus{{Name: source, Err: err.Error()}}}
}

// PollError is the error of a snapshot that stands for a failed poll
// (Outage), also once a recording has merged other sources' locks into
// it; "" for a snapshot of locks.
func (s *Snapshot) PollError() string {
	if len(s.Sources) == 1 && s.Sources[0].Taken.IsZero() {
		return s.Sources[0].Err
	}
	return ""
}
