// Command locktop is a terminal dashboard for application locks
// (PostgreSQL advisory locks and lock waits, Redis session mutexes, lease
// locks), with an embedded simulator that drives real workers through the
// lock libraries. Run "locktop help" for the commands; internal/cli has
// them all.
package main

import (
	"context"
	"os"

	"github.com/locktop/locktop/internal/cli"
)

func main() {
	ctx, stop := cli.SignalContext(context.Background())
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
