package leasedb

import (
	"regexp"
	"strings"
	"testing"

	"github.com/locktop/locktop/internal/testenv/benchscript"
)

// benchScriptPath is the pgbench script of the lease source's baseline
// (the one-pane figure of `make bench`).
const benchScriptPath = "../../testdata/bench/lease-list.sql"

// benchScript renders one listing as pgbench runs it: the very statements
// ReadPostgres sends, in one pipeline (one implicit transaction, as its pgx
// batch is), on lockcore/lease's default schema, with a pgbench variable
// for the one parameter. Run with LOCKTOP_WRITE_BENCH_SQL=1 to write
// testdata/bench/lease-list.sql.
func benchScript() string {
	stmt := func(sql string) string {
		sql = strings.ReplaceAll(InSchema("locktop_lease", sql), "$1", ":audit")
		return regexp.MustCompile(`\s*\n\s*`).ReplaceAllString(sql, " ") + ";\n"
	}
	var b strings.Builder
	b.WriteString(`-- One listing of the lease tables, as the monitor's lease source sends it
-- (internal/leasedb.ReadPostgres): generated from the package's statements by
-- LOCKTOP_WRITE_BENCH_SQL=1 go test ./internal/leasedb -run TestBenchScript
-- (TestBenchScript fails when this file and the package disagree).
-- Run: pgbench -n -M prepared -f lease-list.sql -c 1 -T 5 DBNAME
-- The schema must exist (any lease Manager opened on DBNAME creates it).
\set audit ` + "100" + `
\startpipeline
`)
	for _, s := range []string{pgNow, pgHolders, pgWaiters, PGJobs, PGAudit} {
		b.WriteString(stmt(s))
	}
	b.WriteString("\\endpipeline\n")
	return b.String()
}

// TestBenchScript keeps the pgbench baseline sending what the source
// sends.
func TestBenchScript(t *testing.T) {
	if AuditListed != 100 {
		t.Fatalf("the script lists 100 audit records; the package %d", AuditListed)
	}
	benchscript.Check(t, benchScriptPath, benchScript(), "./internal/leasedb")
}
