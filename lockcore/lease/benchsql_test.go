package lease

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/locktop/locktop/internal/testenv/benchscript"
)

// benchScriptPath is the pgbench script of the lock-cycle baseline.
const benchScriptPath = "../../testdata/bench/lease-cycle.sql"

// benchScript renders one acquire + release as pgbench runs it: the very
// statements pgStore sends, in the same pipelines (each one implicit
// transaction, as a pgx batch is), on the default schema,
// with pgbench variables in place of the parameters. Run with
// LOCKTOP_WRITE_BENCH_SQL=1 to write testdata/bench/lease-cycle.sql.
func benchScript() string {
	stmt := func(sql string, vars ...string) string {
		sql = inSchema(DefaultSchema, sql)
		// $10 before $1: replace from the highest number down.
		for i := len(vars); i >= 1; i-- {
			sql = strings.ReplaceAll(sql, fmt.Sprintf("$%d", i), ":"+vars[i-1])
		}
		return regexp.MustCompile(`\s*\n\s*`).ReplaceAllString(sql, " ") + ";\n"
	}
	var b strings.Builder
	b.WriteString(`-- One lease lock cycle (acquire + release, uncontended), as lockcore/lease
-- sends it to PostgreSQL: generated from the package's statements by
-- LOCKTOP_WRITE_BENCH_SQL=1 go test ./lockcore/lease -run TestBenchScript
-- (TestBenchScript fails when this file and the package disagree).
-- Run: pgbench -n -M prepared -f lease-cycle.sql -c 1 -T 5 -D mode=write \
--        -D owner=bench -D chan=locktop_lease -D conflicting={read,write,upgradeable} \
--        -D precedence=false DBNAME
-- The schema must exist (any lease Manager opened on DBNAME creates it).
\set id random(1, 10000)
\set tok random(1, 1000000000000000)
\set lease 30000000
\set grace 20000
\set wid random(1, 1000000000000000)
\set ttl 10000000
\startpipeline
`)
	b.WriteString(stmt(pgBumpResource, "id"))
	b.WriteString(stmt(pgState, "id"))
	b.WriteString(stmt(pgFastGrant, "id", "tok", "mode", "owner", "lease", "grace", "conflicting", "precedence", "wid"))
	b.WriteString(stmt(pgWaitIfRefused, "wid", "id", "mode", "owner", "ttl", "tok"))
	b.WriteString("\\endpipeline\n\\startpipeline\n")
	b.WriteString(stmt(pgShareRow, "id"))
	b.WriteString(stmt(pgRelease, "tok"))
	b.WriteString(stmt(pgWakeIfWait, "id", "chan"))
	b.WriteString("\\endpipeline\n")
	return b.String()
}

// TestBenchScript keeps the pgbench baseline sending what the package
// sends.
func TestBenchScript(t *testing.T) {
	benchscript.Check(t, benchScriptPath, benchScript(), "./lockcore/lease")
}
