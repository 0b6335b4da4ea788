package cli

import (
	"os"

	"github.com/charmbracelet/x/term"
)

// isTerminal reports whether f is a terminal; tests replace it.
var isTerminal = func(f *os.File) bool { return term.IsTerminal(f.Fd()) }
