package cli

import (
	"errors"
	"fmt"
	"io"
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

// report prints err as one line and returns the exit code it calls for.
func report(err error, stderr io.Writer) int {
	if err == nil {
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
