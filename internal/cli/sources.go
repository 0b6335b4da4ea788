package cli

import (
	"context"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/internal/source"
	"github.com/locktop/locktop/internal/source/pgsource"
	"github.com/locktop/locktop/internal/source/redissource"
	"github.com/locktop/locktop/ui"
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
		redis:       fs.String("redis", "", "also watch the Redis session mutexes at this URL: redis://host:port/db, unix:///path, a Cluster (any node's URL, or redis://host1:port?addr=host2:port&addr=...) or Sentinel (?master_name=NAME); default $REDIS_URL"),
		leaseDSN:    fs.String("lease-dsn", "", "also watch the lease locks in this PostgreSQL database (connection string)"),
		leaseSQLite: fs.String("lease-sqlite", "", "also watch the lease locks in this SQLite file"),
		timeout:     fs.Duration("source-timeout", 2*time.Second, "how long each source but PostgreSQL may take to answer a poll"),
	}
}

// redisURL is --redis, else $REDIS_URL.
func (f *sourceFlags) redisURL() string {
	if *f.redis != "" {
		return *f.redis
	}
	return os.Getenv("REDIS_URL")
}

// otherSources opens the sources the flags name, each bounded by
// --source-timeout, and returns them with a function that closes them:
// the Redis of --redis (else $REDIS_URL), the lease tables of --lease-dsn
// or else of the watched database (when it has them; its own small pool,
// so the monitor's poll and health probe never wait for it), and the
// SQLite file of --lease-sqlite. A source that cannot be set up (a bad
// URL or DSN) is bad usage (exit 2); one that fails later shows as that
// source's error only.
func otherSources(ctx context.Context, f *sourceFlags, dsn string) ([]source.Source, func(), error) {
	var (
		out     []source.Source
		closers []func()
	)
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	add := func(s source.Source, close func()) {
		out = append(out, source.WithTimeout(s, *f.timeout))
		if close != nil {
			closers = append(closers, close)
		}
	}
	if *f.timeout <= 0 {
		return nil, closeAll, usagef("--source-timeout must be positive, not %v", *f.timeout)
	}
	if u := f.redisURL(); u != "" {
		r, err := redissource.Open(u, redissource.Options{})
		if err != nil {
			return nil, closeAll, usagef("--redis: %v", err)
		}
		add(r, r.Close)
	}
	leaseDSN, optional := *f.leaseDSN, false
	if leaseDSN == "" {
		leaseDSN, optional = dsn, true
	}
	cfg, err := pgsource.Config(leaseDSN, pgsource.Options{})
	if err != nil {
		closeAll()
		return nil, closeAll, usagef("--lease-dsn: %v", err)
	}
	cfg.MaxConns = 1
	cfg.ConnConfig.RuntimeParams["application_name"] = pgsource.ApplicationName + ".lease"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		closeAll()
		return nil, closeAll, usagef("--lease-dsn: %v", err)
	}
	add(source.LeasePostgres("lease", pool, "", optional), pool.Close)
	if p := *f.leaseSQLite; p != "" {
		add(source.LeaseSQLite("lease-sqlite", p), nil)
	}
	return out, closeAll, nil
}

// uiSources are the dashboard's sources beside the server: through mo's
// tee when the endpoints serve them too.
func uiSources(mo *monitoring, others []source.Source) []ui.LockSource {
	out := make([]ui.LockSource, len(others))
	for i, o := range others {
		if mo != nil {
			o = mo.tee(i)
		}
		out[i] = o
	}
	return out
}
