package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"

	"github.com/locktop/locktop/internal/pgcluster"
)

func init() {
	register(command{name: "cluster", summary: "run a command against a throw-away PostgreSQL, removed when the command ends",
		about: "The command runs with PGHOST, PGPORT, PGUSER, PGDATABASE, DATABASE_URL and LOCKTOP_TEST_DSN\npointing at the server (a Unix socket, never TCP); its exit code is locktop's.",
		run:   runCluster})
}

// runCluster starts a throw-away cluster, runs the given command with PGHOST,
// PGPORT, PGUSER, PGDATABASE, DATABASE_URL and LOCKTOP_TEST_DSN pointing at
// it, and removes the cluster afterwards. make bench uses it to put the Go
// benchmarks and pgbench on one server in one run.
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
	dsn := c.DSN("postgres")
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	cmd.Env = append(os.Environ(),
		"PGHOST="+c.SocketDir(), "PGPORT=5432", "PGUSER="+pgcluster.Superuser, "PGDATABASE=postgres",
		"DATABASE_URL="+dsn, "LOCKTOP_TEST_DSN="+dsn)
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return exitError{code: ee.ExitCode(), err: fmt.Errorf("%s exited with status %d", args[0], ee.ExitCode())}
	}
	return err
}
