package cli

import (
	"os"
	"testing"

	"github.com/locktop/locktop/internal/testenv/pgtest"
)

// envRunMain makes the test binary act as locktop itself, so a test can run
// the real command in a child process and send it signals.
const envRunMain = "LOCKTOP_TEST_RUN_MAIN"

// The tests of package main use a real PostgreSQL (serve, snapshot, the
// simulator's headless runs, the dashboard's end-to-end tests and its
// benchmark), so the package gets one.
func TestMain(m *testing.M) {
	if os.Getenv(envRunMain) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	code := pgtest.Run(m)
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}
