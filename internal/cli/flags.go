package cli

import (
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// Flags are POSIX style, as psql and pg_activity have them: -h HOST or
// --host HOST (or --host=HOST), flags and the connection string in any
// order, -- ends the flags. pflag does the parsing; this file adds what
// every command shares: --help on stdout, one line and exit code 2 for a
// bad flag, and the connection options of the commands that connect.

// flagSet is one command's flags.
type flagSet struct {
	*pflag.FlagSet
	name string     // the command, "dashboard" for the bare locktop
	conn *connFlags // the connection options, for commands that connect
	// args, when not "", names the command's own positional arguments in
	// its usage line ("-- COMMAND [ARGS...]"); they are left in Args().
	args string
}

// newFlagSet returns the flag set of command name. Parsing reports errors
// instead of printing them or exiting; --help is a flag of every command.
func newFlagSet(name string) *flagSet {
	fs := pflag.NewFlagSet("locktop "+name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.SortFlags = false
	fs.Bool("help", false, "show this help and exit")
	return &flagSet{FlagSet: fs, name: name}
}

// helpError is returned by parseFlags when --help was asked for: run prints
// the text to stdout and exits 0.
type helpError struct{ text string }

func (e helpError) Error() string { return "help requested" }

// goFlag is a Go-style single-dash long flag: -dsn, -json, -help.
var goFlag = regexp.MustCompile(`^-([A-Za-z][A-Za-z0-9-]+)(=.*)?$`)

// parseFlags parses args. --help returns a helpError with the command's
// usage; a bad flag, a bad value or a stray argument is a usageError of one
// line. For a command that connects, one positional argument is its
// connection string, checked against the other connection options here.
func parseFlags(fs *flagSet, args []string) error {
	for _, a := range args {
		if a == "--" {
			break
		}
		// pflag would read -dsn as -d sn (the database "sn"), -help as
		// -h elp: catch the Go spelling of a long flag instead.
		if m := goFlag.FindStringSubmatch(a); m != nil && (m[1] == "help" || fs.Lookup(m[1]) != nil) {
			return fs.usageErr(fmt.Errorf("-%s: long flags take two dashes: --%s", m[1], m[1]))
		}
	}
	err := fs.Parse(args)
	if errors.Is(err, pflag.ErrHelp) || (err == nil && fs.Changed("help")) {
		return helpError{fs.help()}
	}
	if err != nil {
		return fs.usageErr(err)
	}
	if fs.args != "" {
		return nil
	}
	rest := fs.Args()
	if fs.conn != nil && len(rest) > 0 {
		if err := fs.conn.setPositional(rest[0]); err != nil {
			return fs.usageErr(err)
		}
		rest = rest[1:]
	}
	if len(rest) > 0 {
		if isConnString(rest[0]) {
			// Not echoed: it may carry a password.
			return fs.usageErr(errors.New("unexpected argument: a second connection string"))
		}
		return fs.usageErr(fmt.Errorf("unexpected argument %q", rest[0]))
	}
	if fs.conn != nil {
		if err := fs.conn.check(); err != nil {
			return fs.usageErr(err)
		}
	}
	return nil
}

// usageErr is err as one line naming the command and where its help is.
func (fs *flagSet) usageErr(err error) error {
	if fs.name == "dashboard" {
		return usagef("%v (see locktop --help)", err)
	}
	return usagef("%s: %v (see locktop %s --help)", fs.name, err, fs.name)
}

// help is the command's usage: what it does, its synopsis, its connection
// options and its other flags.
func (fs *flagSet) help() string {
	if fs.name == "dashboard" {
		return topHelp()
	}
	var b strings.Builder
	c, _ := lookup(fs.name)
	synopsis := "[flags]"
	switch {
	case fs.args != "":
		synopsis += " " + fs.args
	case fs.conn != nil:
		synopsis += " [CONNINFO]"
	}
	fmt.Fprintf(&b, "Usage: locktop %s %s\n\n%s\n", fs.name, synopsis, c.summary)
	if c.about != "" {
		fmt.Fprintf(&b, "\n%s\n", c.about)
	}
	fs.writeFlags(&b)
	return b.String()
}

// writeFlags writes the connection options, then the other flags, in one
// column layout.
func (fs *flagSet) writeFlags(b *strings.Builder) {
	var conn, own []flagLine
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Name == "help" {
			return // last, below
		}
		if fs.conn != nil && fs.conn.set.Lookup(f.Name) != nil {
			conn = append(conn, newFlagLine(f))
		} else {
			own = append(own, newFlagLine(f))
		}
	})
	own = append(own, newFlagLine(fs.Lookup("help")))
	width := 0
	for _, l := range append(append([]flagLine{{left: "  CONNINFO"}}, conn...), own...) {
		width = max(width, len(l.left))
	}
	if fs.conn != nil {
		def := connDefault
		if fs.name == "dashboard" || fs.name == "sim" {
			def = connDefaultThrowAway
		}
		fmt.Fprintf(b, "\nConnection, as psql takes it (the password: in CONNINFO, PGPASSWORD or ~/.pgpass; never printed):\n")
		conn = append([]flagLine{{left: "  CONNINFO", usage: `a URL (postgres://user@host:port/db) or key=value string ("host=db dbname=app")`}}, conn...)
		for _, l := range conn {
			fmt.Fprintf(b, "%-*s  %s\n", width, l.left, l.usage)
		}
		fmt.Fprintf(b, "  %s\n", def)
	}
	b.WriteString("\nFlags:\n")
	for _, l := range own {
		fmt.Fprintf(b, "%-*s  %s\n", width, l.left, l.usage)
	}
}

// flagLine is one flag in a help text: "  -h, --host string" and its usage.
type flagLine struct{ left, usage string }

func newFlagLine(f *pflag.Flag) flagLine {
	left := "      --" + f.Name
	if f.Shorthand != "" {
		left = "  -" + f.Shorthand + ", --" + f.Name
	}
	varname, usage := pflag.UnquoteUsage(f)
	if f.Value.Type() != "bool" && varname != "" {
		left += " " + varname
	}
	switch f.Value.Type() {
	case "bool":
	case "string":
		if f.DefValue != "" {
			usage += fmt.Sprintf(" (default %q)", f.DefValue)
		}
	default:
		if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "0s" {
			usage += " (default " + f.DefValue + ")"
		}
	}
	return flagLine{left, usage}
}

// minInterval keeps a mistyped --interval from hammering the server.
const minInterval = 100 * time.Millisecond
