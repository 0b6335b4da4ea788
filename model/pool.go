package model

import "time"

// PoolStats is a connection pool's state at one instant, as pgxpool reports
// it plus the number of goroutines waiting for a connection right now (which
// pgxpool does not count, so owners of a pool count it themselves).
type PoolStats struct {
	Name      string // "lock", "work" or "shared"
	MaxConns  int32
	Total     int32 // open connections, in use or idle
	InUse     int32
	Idle      int32
	Waiting   int64 // acquirers blocked waiting for a connection now
	Acquires  int64 // successful acquires, cumulative
	Empty     int64 // acquires that had to wait, cumulative
	Canceled  int64 // acquires abandoned by their context, cumulative
	WaitTotal time.Duration
}

// ServerInfo describes the server the monitor watches.
type ServerInfo struct {
	Version        string // e.g. "15.18"
	Database       string
	User           string
	MaxConnections int
	// Privileged is true for superusers and members of pg_monitor, who see
	// every backend's query, application and state.
	Privileged bool
	// Warning says what a less privileged role cannot see; "" when nothing.
	Warning string
}
