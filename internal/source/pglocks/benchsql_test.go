package pglocks

import (
	"os"
	"testing"
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
	want := benchScript()
	if os.Getenv("LOCKTOP_WRITE_BENCH_SQL") != "" {
		if err := os.WriteFile(benchScriptPath, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(benchScriptPath)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("%s differs from the package's statement; regenerate it with LOCKTOP_WRITE_BENCH_SQL=1 go test ./internal/source/pglocks -run TestBenchScript", benchScriptPath)
	}
}
