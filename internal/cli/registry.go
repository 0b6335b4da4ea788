package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/locktop/locktop/lockcore/registry"
)

func init() {
	register(command{name: "registry", summary: "print the registry of every lock key (advisory, Redis, lease) as a markdown table; --check a registry file",
		about: "The built-in registry is code (package lockcore/registry): every advisory namespace and fixed id,\n" +
			"every hashed-key pattern, Redis key pattern and lease level, with its owner and purpose. Its\n" +
			"advisory names apply only to locktop's own sessions (application_name locktop.*); --registry FILE\n" +
			"brings a team's own (README \"Registries\"). --check FILE reads such a file and reports, with line\n" +
			"numbers, what cannot be read, duplicate names and colliding ids; exit status 1 when any.",
		run: runRegistry})
}

func runRegistry(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("registry")
	check := fs.String("check", "", "read this registry file and report its problems instead of printing the built-in table")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *check != "" {
		return checkRegistry(*check, stdout)
	}
	if err := registry.Check(); err != nil {
		return err
	}
	return registry.WriteMarkdown(stdout)
}

// checkRegistry reports the problems of the registry file at path, one a
// line as file:line: problem, and a summary.
func checkRegistry(path string, stdout io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return usagef("--check: %v", err)
	}
	defer f.Close()
	entries, err := registry.Parse(f)
	if err != nil {
		return exitError{code: exitFailure, err: fmt.Errorf("%s: %w", path, err)}
	}
	errs, warns := 0, 0
	for _, p := range registry.Problems(entries) {
		kind := "error"
		if p.Warning {
			kind, warns = "warning", warns+1
		} else {
			errs++
		}
		fmt.Fprintf(stdout, "%s:%d: %s: %s\n", path, p.Line, kind, p.Msg)
	}
	fmt.Fprintf(stdout, "%s: %d entries, %d errors, %d warnings\n", path, len(entries), errs, warns)
	if errs > 0 {
		return exitError{code: exitFailure, err: errors.New(path + ": the registry has errors (above)")}
	}
	return nil
}
