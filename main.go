// Command locktop is a terminal dashboard for the application locks in a
// PostgreSQL database, with an embedded simulator that drives real workers
// through the lock library. Run "locktop help" for the commands.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Exit codes shared by every command.
const (
	exitOK      = 0
	exitFailure = 1 // the command ran and something failed (e.g. an invariant broke)
	exitUsage   = 2 // bad usage, bad DSN, unreachable server, wrong password
)

// usageError marks an error as the caller's: a bad flag or argument.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// exitError carries a specific exit code with its message.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string { return e.err.Error() }
func (e exitError) Unwrap() error { return e.err }

// command is one subcommand: run gets the arguments after its name.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// commands lists the subcommands; each lives in its own cmd_*.go file. The
// bare "locktop" (no subcommand) is the dashboard.
var commands []command

func register(c command) { commands = append(commands, c) }

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	// Ctrl-C, SIGTERM and SIGHUP cancel ctx; every command stops what it
	// started. SIGHUP too, because closing the dashboard's terminal window
	// must still remove the throw-away cluster.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	// After the first signal, a second one ends the process at once, without
	// waiting for the clean shutdown (a throw-away server then dies with us,
	// and its directory is swept by a later start).
	context.AfterFunc(ctx, stop)

	name, rest := "", args
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		name, rest = args[0], args[1:]
	}
	var err error
	switch name {
	case "", "dashboard":
		err = runDashboard(ctx, rest, stdout, stderr)
	case "help":
		printUsage(stdout)
		return exitOK
	default:
		found := false
		for _, c := range commands {
			if c.name == name {
				found = true
				err = c.run(ctx, rest, stdout, stderr)
				break
			}
		}
		if !found {
			err = usagef("unknown command %q (run \"locktop help\")", name)
		}
	}
	return report(err, stderr)
}

// report prints err as one line and returns the exit code it calls for.
func report(err error, stderr io.Writer) int {
	if err == nil {
		return exitOK
	}
	if errors.Is(err, errHelpShown) {
		return exitOK
	}
	fmt.Fprintln(stderr, "locktop:", err)
	var ue usageError
	var ee exitError
	switch {
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, &ue):
		return exitUsage
	}
	return exitFailure
}

// errHelpShown is returned by a command that printed its help on request.
var errHelpShown = errors.New("help shown")

func printUsage(w io.Writer) {
	fmt.Fprint(w, `locktop: watch PostgreSQL advisory locks live, and simulate contention.

Usage:
  locktop [flags]              dashboard; with no DSN, on a throw-away PostgreSQL with the simulator
  locktop <command> [flags]

Commands:
`)
	for _, c := range commands {
		fmt.Fprintf(w, "  %-12s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, `
Run "locktop <command> -h" for a command's flags.
`)
}
