package cli

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/locktop/locktop/internal/testenv/redisserver"
	"github.com/locktop/locktop/sim"
)

// systemFlags are the simulator's flags for the ACF session mutex and the
// FOLE lease locks: the Redis of the conversation turns and the store of
// the jobs' leases.
type systemFlags struct {
	redisURL      *string
	failOpen      *bool
	conversations *int
	leaseStore    *string
	leasePath     *string
}

func addSystemFlags(fs *flagSet) *systemFlags {
	return &systemFlags{
		redisURL:      fs.String("redis", "", "Redis of the conversation turns (acf, all), as a URL: redis://host:6379/0, unix:///path, a Cluster (any node's URL, or redis://host1:port?addr=host2:port&addr=...) or Sentinel (?master_name=NAME) (default $REDIS_URL, else a throw-away Redis)"),
		failOpen:      fs.Bool("fail-open", false, "turns run without the lock while Redis is unreachable (the ACF session mutex's risky fallback); default: fail closed"),
		conversations: fs.Int("conversations", 0, "number of conversations (0: the scenario's)"),
		leaseStore:    fs.String("lease-store", sim.LeasePostgres, "where the jobs' lease locks live (fole, all): postgres (the same database, schema locktop_lease) or sqlite"),
		leasePath:     fs.String("lease-path", "", "the SQLite file of --lease-store sqlite (default: a file of the simulator's own)"),
	}
}

func (f *systemFlags) check() error {
	switch *f.leaseStore {
	case sim.LeasePostgres, sim.LeaseSQLite:
	default:
		return usagef("--lease-store must be %s or %s, not %q", sim.LeasePostgres, sim.LeaseSQLite, *f.leaseStore)
	}
	if *f.leasePath != "" && *f.leaseStore != sim.LeaseSQLite {
		return usagef("--lease-path names a SQLite file: add --lease-store sqlite")
	}
	return nil
}

// redis returns the Redis URL for scenario: --redis, else $REDIS_URL,
// else, when the scenario runs conversation turns, a throw-away Redis
// (stopped by the returned function).
func (f *systemFlags) redis(ctx context.Context, scenario string, stderr io.Writer) (string, func(), error) {
	if *f.redisURL != "" {
		return *f.redisURL, func() {}, nil
	}
	if u := os.Getenv("REDIS_URL"); u != "" {
		return u, func() {}, nil
	}
	sys, _ := sim.SystemsOf(scenario)
	if sys&(sim.SystemTurns|sim.SystemDeadlocks) == 0 {
		return "", func() {}, nil
	}
	fmt.Fprintln(stderr, "starting a throw-away Redis...")
	rs, err := redisserver.Start(ctx, redisserver.Options{})
	if err != nil {
		return "", nil, err
	}
	return rs.URL(), func() { _ = rs.Stop() }, nil
}
