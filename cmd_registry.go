package main

import (
	"context"
	"flag"
	"io"

	"github.com/locktop/locktop/lockcore/registry"
)

func init() {
	register(command{name: "registry", summary: "print the registry of every lock key (advisory, Redis, lease) as a markdown table", run: runRegistry})
}

func runRegistry(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("registry", stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := registry.Check(); err != nil {
		return err
	}
	return registry.WriteMarkdown(stdout)
}

// newFlagSet returns a flag set that reports errors instead of exiting.
func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("locktop "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// parseFlags parses args, turning -h into errHelpShown, a bad flag into a
// usage error, and rejecting stray arguments.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return errHelpShown
		}
		return usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	return nil
}
