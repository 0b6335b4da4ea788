package cli

import (
	"context"
	"io"

	"github.com/locktop/locktop/lockcore/registry"
)

func init() {
	register(command{name: "registry", summary: "print the registry of every lock key (advisory, Redis, lease) as a markdown table",
		about: "The registry is code (package lockcore/registry): every advisory namespace and fixed id, every\nhashed-key pattern, Redis key pattern and lease level, with its owner and purpose.",
		run:   runRegistry})
}

func runRegistry(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("registry")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := registry.Check(); err != nil {
		return err
	}
	return registry.WriteMarkdown(stdout)
}
