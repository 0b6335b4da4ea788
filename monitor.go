package main

import (
	"context"
	"errors"

	"github.com/locktop/locktop/internal/monitor"
)

// openMonitor connects the read-only monitor. A server that cannot be used
// (bad DSN, unreachable, wrong password, no such database) is the caller's
// problem to fix: one line and exit code 2.
func openMonitor(ctx context.Context, dsn string) (*monitor.Monitor, error) {
	m, err := monitor.Connect(ctx, dsn, monitor.Options{})
	if err != nil {
		var ce *monitor.ConnectError
		if errors.As(err, &ce) {
			return nil, exitError{code: exitUsage, err: err}
		}
		return nil, err
	}
	return m, nil
}
