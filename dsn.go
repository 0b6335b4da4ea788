package main

import "os"

// pgEnv are the libpq variables that name a server; any of them set means
// the operator pointed locktop at a database.
var pgEnv = []string{"PGHOST", "PGHOSTADDR", "PGPORT", "PGDATABASE", "PGUSER", "PGSERVICE"}

// resolveDSN picks the server to use: the --dsn flag, else DATABASE_URL,
// else the PG* variables (returned as "", which pgx reads from the
// environment). given is false when none is set: the caller then starts a
// throw-away cluster.
func resolveDSN(flagDSN string) (dsn string, given bool) {
	if flagDSN != "" {
		return flagDSN, true
	}
	if u := os.Getenv("DATABASE_URL"); u != "" {
		return u, true
	}
	for _, v := range pgEnv {
		if os.Getenv(v) != "" {
			return "", true
		}
	}
	return "", false
}
