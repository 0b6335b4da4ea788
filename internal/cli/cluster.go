package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"

	"github.com/locktop/locktop/internal/testenv/pgcluster"
	"github.com/locktop/locktop/internal/testenv/redisserver"
)

func init() {
	register(command{name: "cluster", summary: "run a command against a throw-away PostgreSQL and Redis, removed when the command ends",
		about: "The command runs with PGHOST, PGPORT, PGUSER, PGDATABASE, DATABASE_URL and LOCKTOP_TEST_DSN\npointing at the PostgreSQL server, and REDIS_URL and LOCKTOP_TEST_REDIS at the Redis\n(both on Unix sockets, never TCP); its exit code is locktop's.",
		run:   runCluster})
}

// runCluster starts a throw-away cluster and a throw-away Redis, runs the
// given command with PGHOST, PGPORT, PGUSER, PGDATABASE, DATABASE_URL and
// LOCKTOP_TEST_DSN pointing at the cluster and REDIS_URL and
// LOCKTOP_TEST_REDIS at the Redis, and removes both afterwards. make bench
// uses it to put the Go benchmarks and pgbench (or redis-benchmark) on one
// server in one run.
func runCluster(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("cluster")
	fs.args = "[--] COMMAND [ARGS...]"
	fs.SetInterspersed(false) // the command's own flags are its own
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	args = fs.Args()
	if len(args) == 0 {
		return usagef("cluster: no command to run (usage: locktop cluster -- COMMAND [ARGS...])")
	}
	c, err := pgcluster.Start(ctx, pgcluster.Options{})
	if err != nil {
		return err
	}
	defer c.Stop()
	rs, err := redisserver.Start(ctx, redisserver.Options{})
	if err != nil {
		return err
	}
	defer rs.Stop()
	dsn := c.DSN("postgres")
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	cmd.Env = append(os.Environ(),
		"PGHOST="+c.SocketDir(), "PGPORT=5432", "PGUSER="+pgcluster.Superuser, "PGDATABASE=postgres",
		"DATABASE_URL="+dsn, "LOCKTOP_TEST_DSN="+dsn,
		"REDIS_URL="+rs.URL(), "LOCKTOP_TEST_REDIS="+rs.URL())
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return exitError{code: ee.ExitCode(), err: fmt.Errorf("%s exited with status %d", args[0], ee.ExitCode())}
	}
	return err
}
