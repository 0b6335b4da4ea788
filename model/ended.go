package model

import "strconv"

// Why a session ended, as far as the server proves it (SessionEnd.Cause).
const (
	// EndTerminated: the session was terminated. Either this locktop's own
	// terminate action ended it (SessionEnd.By is "locktop"), or the
	// server's count of sessions terminated by pg_terminate_backend (or a
	// fast shutdown: pg_stat_database.sessions_killed) rose in the poll
	// interval by at least as many sessions as ended in it, so every
	// session that ended then was terminated.
	EndTerminated = "terminated"
	// EndEnded: the session's backend is gone and nothing proves why: its
	// client closed it, its connection broke, it ended on an error, or it
	// was terminated while other sessions ended too.
	EndEnded = "ended"
)

// ByLocktop is SessionEnd.By for a session this locktop terminated.
const ByLocktop = "locktop"

// SessionEnd is a session that held or waited on a lock in its source's
// previous snapshot and has ended since: the server lists no backend with
// its pid any more. A lock that goes with its session was not released by
// it, and a waiter that goes with its session did not give up.
type SessionEnd struct {
	PID      int32
	Database string
	// Cause is EndTerminated or EndEnded.
	Cause string
	// By is ByLocktop when this locktop's terminate action ended the
	// session; "" otherwise.
	By string `json:",omitempty"`
	// Server is the target's name, as Lock.Server.
	Server string `json:",omitempty"`
}

// Ending returns how the session of holder (Lock.Holder: a pid) on server
// ended in s, if s says it did.
func (s *Snapshot) Ending(server, holder string) (SessionEnd, bool) {
	for _, e := range s.Ended {
		if e.Server == server && strconv.Itoa(int(e.PID)) == holder {
			return e, true
		}
	}
	return SessionEnd{}, false
}

// Words is how a review says it: "terminated by locktop", "terminated",
// "session ended".
func (e SessionEnd) Words() string {
	switch {
	case e.Cause == EndTerminated && e.By != "":
		return "terminated by " + e.By
	case e.Cause == EndTerminated:
		return "terminated"
	}
	return "session ended"
}
