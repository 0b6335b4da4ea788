package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
)

// command is one subcommand: run gets the arguments after its name.
type command struct {
	name    string
	summary string // one line, for the list of commands and the top of its help
	about   string // more, for its help (optional)
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// commands lists the subcommands; each lives in its own file (serve.go, snapshot.go, …) and
// registers itself. The bare "locktop" (no subcommand) is the dashboard.
var commands []command

func register(c command) {
	commands = append(commands, c)
	slices.SortFunc(commands, func(a, b command) int { return strings.Compare(a.name, b.name) })
}

// lookup returns the command called name.
func lookup(name string) (command, bool) {
	for _, c := range commands {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// SignalContext is the context every command runs under: Ctrl-C, SIGTERM
// and SIGHUP cancel it, and every command stops what it started. SIGHUP
// too, because closing the dashboard's terminal window must still remove
// the throw-away cluster. After the first signal, a second one ends the
// process at once, without waiting for the clean shutdown (a throw-away
// server then dies with us, and its directory is swept by a later start).
func SignalContext(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	context.AfterFunc(ctx, stop)
	return ctx, stop
}

// run is Main under SignalContext, as the test binary runs it when it
// stands in for locktop.
func run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := SignalContext(context.Background())
	defer stop()
	return Main(ctx, args, stdout, stderr)
}

// Main runs the locktop command line args (without the program's name)
// and returns the process's exit code: 0 success, 1 failure, 2 bad usage
// or a server that cannot be used. Errors are one line on stderr.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	// The first argument is a command's name, unless it is a flag or a
	// connection string: then it is the dashboard's.
	name, rest := "", args
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") && !isConnString(args[0]) {
		name, rest = args[0], args[1:]
	}
	var err error
	switch {
	case name == "" && len(rest) > 0 && rest[0] == "--version", name == "version":
		if len(rest) > 0 && name == "version" {
			err = usagef("version: unexpected argument %q", rest[0])
			break
		}
		fmt.Fprintln(stdout, versionString())
	case name == "" || name == "dashboard":
		err = runDashboard(ctx, rest, stdout, stderr)
	case name == "help":
		err = runHelp(rest, stdout)
	default:
		if c, ok := lookup(name); ok {
			err = c.run(ctx, rest, stdout, stderr)
		} else {
			err = usagef("unknown command %q (run \"locktop help\")", name)
		}
	}
	var he helpError
	if errors.As(err, &he) {
		fmt.Fprint(stdout, he.text)
		return exitOK
	}
	return report(err, stderr)
}

// runHelp is "locktop help [COMMAND]".
func runHelp(args []string, stdout io.Writer) error {
	switch {
	case len(args) == 0 || args[0] == "dashboard" || strings.HasPrefix(args[0], "-"):
		fmt.Fprint(stdout, topHelp())
		return nil
	case len(args) > 1:
		return usagef("help: unexpected argument %q", args[1])
	}
	c, ok := lookup(args[0])
	if !ok {
		return usagef("help: unknown command %q (run \"locktop help\")", args[0])
	}
	// Every command answers --help before it does anything else.
	return c.run(context.Background(), []string{"--help"}, io.Discard, io.Discard)
}

// topHelp is "locktop --help": the commands, the connection options and
// the dashboard's flags. README's Commands section is a copy of it.
func topHelp() string {
	var b strings.Builder
	b.WriteString(`locktop: watch application locks live (PostgreSQL advisory locks and lock waits, Redis session
mutexes, lease locks), record and replay them, and simulate contention.

Usage:
  locktop [flags] [CONNINFO]   the dashboard; with no server named, on a throw-away PostgreSQL and Redis with the simulator
  locktop COMMAND [flags]      one of the commands below
  locktop COMMAND --help       a command's flags

Commands:
`)
	for _, c := range commands {
		fmt.Fprintf(&b, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(&b, "  %-10s %s\n", "help", "this help; help COMMAND: a command's")
	fmt.Fprintf(&b, "  %-10s %s\n", "version", "print the version (also --version)")
	fs, _ := newDashboardFlags()
	fs.writeFlags(&b)
	b.WriteString(`
Exit codes: 0 success; 1 failure (for sim: an invariant broke); 2 bad usage, or a database
that cannot be used (bad DSN, unreachable, TLS, authentication). Errors are one line on stderr.
`)
	return b.String()
}
