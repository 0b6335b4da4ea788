package cli

import (
	"context"
	"os"
	"time"

	"github.com/locktop/locktop/internal/source"
	"github.com/locktop/locktop/lockcore/registry"
	"github.com/locktop/locktop/model"
)

// sourceFlags name the lock sources beside the PostgreSQL server: a Redis
// holding session mutexes and a lease table (a PostgreSQL DSN or a SQLite
// file). The watched database's own lease schema is found by itself.
type sourceFlags struct {
	redis       *string
	leaseDSN    *string
	leaseSQLite *string
	timeout     *time.Duration
	registry    *string
}

func addSourceFlags(fs *flagSet) *sourceFlags {
	return &sourceFlags{
		redis:       fs.String("redis", "", "also watch the Redis session mutexes at this URL: redis://host:port/db, unix:///path, a Cluster (any node's URL, or redis://host1:port?addr=host2:port&addr=...) or Sentinel (?master_name=NAME); default $REDIS_URL"),
		leaseDSN:    fs.String("lease-dsn", "", "also watch the lease locks in this PostgreSQL database (connection string)"),
		leaseSQLite: fs.String("lease-sqlite", "", "also watch the lease locks in this SQLite file"),
		timeout:     fs.Duration("source-timeout", defaultSourceTimeout, "how long each source but PostgreSQL may take to answer a poll"),
		registry:    fs.String("registry", "", "name keys with the registry in `FILE` too (markdown, as locktop registry prints it, or a lock registry kept by hand: README \"Registries\"); \"builtin\": the built-in names everywhere"),
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
	names, err := loadRegistry(*f.registry)
	if err != nil {
		return SourceConfig{}, err
	}
	return SourceConfig{Redis: f.redisURL(), LeaseDSN: *f.leaseDSN, LeaseSQLite: *f.leaseSQLite, Timeout: *f.timeout, Registry: names}, nil
}

// loadRegistry is the registry --registry names: the file's entries
// first, then the built-in ones (which apply to this project's own
// sessions only); "builtin", the built-in ones everywhere; "", nil (the
// built-in ones).
func loadRegistry(path string) (*registry.Registry, error) {
	switch path {
	case "":
		return nil, nil
	case "builtin":
		return registry.Everywhere(), nil
	}
	r, err := registry.Load(path)
	if err != nil {
		return nil, usagef("--registry: %v", err)
	}
	return registry.Join(r, registry.Builtin()), nil
}

// named names the Redis keys and lease resources of a source with a
// registry, in the database each lock reports.
type named struct {
	source.Source
	names *registry.Registry
}

// Present is the named source's (source.Present).
func (n named) Present(ctx context.Context) bool { return source.Present(ctx, n.Source) }

func (n named) Poll(ctx context.Context) (model.Snapshot, error) {
	snap, err := n.Source.Poll(ctx)
	for i := range snap.Locks {
		l := &snap.Locks[i]
		switch l.Kind {
		case model.KindRedis:
			l.Namespace = n.names.NameOf(registry.RedisKey, l.Name, registry.Scope{Database: l.Database})
		case model.KindLease:
			l.Namespace = n.names.NameOf(registry.LeaseLevel, l.Name, registry.Scope{Database: l.Database})
		}
	}
	return snap, err
}
