package cli

import (
	"os"
	"time"
)

// sourceFlags name the lock sources beside the PostgreSQL server: a Redis
// holding session mutexes and a lease table (a PostgreSQL DSN or a SQLite
// file). The watched database's own lease schema is found by itself.
type sourceFlags struct {
	redis       *string
	leaseDSN    *string
	leaseSQLite *string
	timeout     *time.Duration
}

func addSourceFlags(fs *flagSet) *sourceFlags {
	return &sourceFlags{
		redis:       fs.String("redis", "", "also watch the Redis session mutexes at this URL (redis://host:port/db or unix:///path); default $REDIS_URL"),
		leaseDSN:    fs.String("lease-dsn", "", "also watch the lease locks in this PostgreSQL database (connection string)"),
		leaseSQLite: fs.String("lease-sqlite", "", "also watch the lease locks in this SQLite file"),
		timeout:     fs.Duration("source-timeout", defaultSourceTimeout, "how long each source but PostgreSQL may take to answer a poll"),
	}
}

// redisURL is --redis, else $REDIS_URL.
func (f *sourceFlags) redisURL() string {
	if *f.redis != "" {
		return *f.redis
	}
	return os.Getenv("REDIS_URL")
}

// config is the sources the flags name: --redis, else $REDIS_URL; the
// lease tables of --lease-dsn, else the watched database's own; the SQLite
// file of --lease-sqlite.
func (f *sourceFlags) config() (SourceConfig, error) {
	if *f.timeout <= 0 {
		return SourceConfig{}, usagef("--source-timeout must be positive, not %v", *f.timeout)
	}
	return SourceConfig{Redis: f.redisURL(), LeaseDSN: *f.leaseDSN, LeaseSQLite: *f.leaseSQLite, Timeout: *f.timeout}, nil
}
