// Package benchscript keeps a pgbench script under testdata/bench equal to
// the statements a package sends, so that `make bench`'s baseline sends
// what the code sends.
package benchscript

import (
	"os"
	"testing"
)

// Check fails t when the file at path differs from want, the script
// generated from the package's own statements. With LOCKTOP_WRITE_BENCH_SQL
// set, it first writes want there. pkg is the package's path, for the
// command the failure names.
func Check(t *testing.T, path, want, pkg string) {
	t.Helper()
	if os.Getenv("LOCKTOP_WRITE_BENCH_SQL") != "" {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("%s differs from the package's statements; regenerate it with LOCKTOP_WRITE_BENCH_SQL=1 go test %s -run TestBenchScript", path, pkg)
	}
}
