package cli

import (
	"context"
	"errors"

	"github.com/locktop/locktop/internal/source/pgsource"
)

// openMonitor connects the read-only pgsource. A server that cannot be used
// (bad DSN, unreachable, wrong password, no such database) is the caller's
// problem to fix: one line and exit code 2.
func openMonitor(ctx context.Context, dsn string) (*pgsource.Monitor, error) {
	m, err := pgsource.Connect(ctx, dsn, pgsource.Options{})
	if err != nil {
		var ce *pgsource.ConnectError
		if errors.As(err, &ce) {
			return nil, exitError{code: exitUsage, err: err}
		}
		return nil, err
	}
	return m, nil
}
