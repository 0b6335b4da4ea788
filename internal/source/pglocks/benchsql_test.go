package pglocks

import (
	"testing"

	"github.com/locktop/locktop/internal/testenv/benchscript"
)

// benchScriptPath is the pgbench script of the PostgreSQL source's own
// statement, sent bare: the pinned reference of the one-pane figure of
// `make bench` (cmd/benchreport/onepane.go).
const benchScriptPath = "../../../testdata/bench/pg-inspect.sql"

// benchScript renders one poll as pgbench sends it: SQL, the very
// statement Read sends. Run with LOCKTOP_WRITE_BENCH_SQL=1 to write
// testdata/bench/pg-inspect.sql.
func benchScript() string {
	return `-- One poll of the monitor's PostgreSQL source, as it sends it
-- (internal/source/pglocks.SQL): generated from the package's statement by
-- LOCKTOP_WRITE_BENCH_SQL=1 go test ./internal/source/pglocks -run TestBenchScript
-- (TestBenchScript fails when this file and the package disagree).
-- Run: pgbench -n -M prepared -f pg-inspect.sql -c 1 -T 5 DBNAME
` + SQL + ";\n"
}

// TestBenchScript keeps the pgbench reference sending what the source
// sends.
func TestBenchScript(t *testing.T) {
	benchscript.Check(t, benchScriptPath, benchScript(), "./internal/source/pglocks")
}
