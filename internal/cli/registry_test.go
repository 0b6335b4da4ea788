package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/locktop/locktop/internal/serve/httpapi"
	"github.com/locktop/locktop/internal/testenv/pgtest"
)

// --registry FILE names a stranger's keys with the team's own registry, a
// markdown table as they keep it by hand; without it the same keys show as
// what they are (the built-in names are for locktop's own sessions).
func TestSnapshotWithRegistryFile(t *testing.T) {
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["application_name"] = "billing-worker"
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "SELECT pg_advisory_lock(1, 7123), pg_advisory_lock(42424242)"); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "locks.md")
	if err := os.WriteFile(file, []byte(`# Billing locks

| Lock ID | Component | Purpose | Scope | Lock Type | File Reference | Applications |
|---------|-----------|---------|-------|-----------|----------------|--------------|
| `+"`(1, id)`"+` | BILLING | One run per account | Per account | Session | `+"`run.go`"+` | billing-* |
| `+"`42424242`"+` | NIGHTLY | The nightly job | Global | Session | `+"`cron.go`"+` | billing-* |
`), 0o644); err != nil {
		t.Fatal(err)
	}
	keys := func(args ...string) []string {
		t.Helper()
		code, stdout, stderr := runCmd(t, append([]string{"snapshot", "--json", "--advisory", "--dsn", pgtest.DSN(t)}, args...)...)
		if code != exitOK {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		var doc httpapi.Document
		if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, l := range doc.Locks {
			if l.PID != nil && *l.PID == int32(c.PgConn().PID()) {
				out = append(out, l.Key+"/"+l.Namespace)
			}
		}
		slices.Sort(out)
		return out
	}
	if got := strings.Join(keys(), ","); got != "1 7123/1,42424242/" {
		t.Errorf("without a registry: %s; want the keys as they are", got)
	}
	if got := strings.Join(keys("--registry", file), ","); got != "BILLING 7123/BILLING,NIGHTLY/NIGHTLY" {
		t.Errorf("with the team's registry: %s", got)
	}
	if got := strings.Join(keys("--registry", "builtin"), ","); got != "AGENT 7123/AGENT,IDEMPOTENCY_CLEANUP/IDEMPOTENCY_CLEANUP" {
		t.Errorf("with the built-in names everywhere: %s", got)
	}
	code, _, stderr := runCmd(t, "snapshot", "--dsn", pgtest.DSN(t), "--registry", filepath.Join(t.TempDir(), "none.md"))
	if code != exitUsage || !strings.Contains(stderr, "--registry") || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
		t.Errorf("a missing registry file: exit %d, %q", code, stderr)
	}
}

// registry --check reports duplicates and colliding ids with their lines,
// and fails; a clean file passes; a hand-kept table reads as it is.
func TestRegistryCheck(t *testing.T) {
	code, stdout, _ := runCmd(t, "registry", "--check", "../../lockcore/registry/testdata/bad.md")
	if code != exitFailure || !strings.Contains(stdout, "bad.md:7: error: namespace 3 used by both Exporter (line 5) and Importer (line 7)") ||
		!strings.Contains(stdout, "bad.md:6: warning:") {
		t.Errorf("bad.md: exit %d\n%s", code, stdout)
	}
	code, stdout, _ = runCmd(t, "registry", "--check", "../../lockcore/registry/testdata/mais.md")
	if code != exitOK || !strings.Contains(stdout, "3 entries, 0 errors") {
		t.Errorf("mais.md: exit %d\n%s", code, stdout)
	}
	// What `locktop registry` prints is a registry file.
	_, table, _ := runCmd(t, "registry")
	file := filepath.Join(t.TempDir(), "builtin.md")
	if err := os.WriteFile(file, []byte(table), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, stdout, _ := runCmd(t, "registry", "--check", file); code != exitOK || !strings.Contains(stdout, "10 entries, 0 errors") {
		t.Errorf("the built-in table: exit %d\n%s", code, stdout)
	}
}
