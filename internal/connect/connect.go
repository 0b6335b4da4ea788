package connect

import (
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultTimeout bounds one connection attempt when the DSN sets no
// connect_timeout: long enough for a distant server's TLS and
// authentication, short enough that a command against a host that never
// answers fails while the operator is still looking.
const DefaultTimeout = 5 * time.Second

// PoolConfig parses dsn ("" means the PG* environment variables) as
// pgxpool.ParseConfig does and bounds each connection attempt (Bound). A
// parse error is pgx's, a *pgconn.ParseConfigError.
func PoolConfig(dsn string) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	Bound(&cfg.ConnConfig.Config)
	return cfg, nil
}

// ConnConfig parses dsn as pgx.ParseConfig does and bounds each connection
// attempt (Bound).
func ConnConfig(dsn string) (*pgx.ConnConfig, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	Bound(&cfg.Config)
	return cfg, nil
}

// Bound sets cfg's ConnectTimeout to DefaultTimeout unless the DSN (or
// PGCONNECT_TIMEOUT) gave a positive connect_timeout. libpq reads 0 as
// "wait forever"; locktop does not offer that.
func Bound(cfg *pgconn.Config) {
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = DefaultTimeout
	}
}

// Timeout returns the bound of one connection attempt for dsn: its
// connect_timeout, else DefaultTimeout. An unparsable dsn gets
// DefaultTimeout (its parse error comes from whoever connects).
func Timeout(dsn string) time.Duration {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return DefaultTimeout
	}
	Bound(cfg)
	return cfg.ConnectTimeout
}
