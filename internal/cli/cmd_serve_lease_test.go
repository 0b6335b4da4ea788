package cli

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/lockcore/lease"
)

// serve names the watched database's lease tables as a source it also
// watches only when the database has them; and its index at / lists every
// endpoint it serves.
func TestServeAlsoWatchesLeaseOnlyWithItsSchema(t *testing.T) {
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, pgtest.AdminDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	for _, withSchema := range []bool{false, true} {
		db := "serve_lease_" + map[bool]string{false: "none", true: "some"}[withSchema]
		if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)"); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.Exec(ctx, "CREATE DATABASE "+db); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)") })
		dsn, err := pgtest.WithDatabase(pgtest.DSN(t), db)
		if err != nil {
			t.Fatal(err)
		}
		if withSchema {
			pool, err := pgxpool.New(ctx, dsn)
			if err != nil {
				t.Fatal(err)
			}
			m, err := lease.OpenPostgres(ctx, pool, lease.Options{})
			if err != nil {
				t.Fatal(err)
			}
			m.Close()
			pool.Close()
		}
		sctx, cancel := context.WithCancel(ctx)
		var stdout, stderr syncBuffer
		errc := make(chan error, 1)
		go func() {
			errc <- runServe(sctx, []string{"--dsn", dsn, "--http", "127.0.0.1:0", "--interval", "100ms"}, &stdout, &stderr)
		}()
		base := waitURL(t, &stdout, errc)
		_, index := httpGet(t, base+"/")
		cancel()
		if err := <-errc; err != nil {
			t.Fatalf("serve: %v", err)
		}
		if said := strings.Contains(stdout.String(), "also watching lease"); said != withSchema {
			t.Errorf("lease schema %v, yet serve said: %q", withSchema, stdout.String())
		}
		for _, e := range []string{"/api/locks", "/api/advisory-locks", "/metrics", "/healthz"} {
			if !strings.Contains(string(index), e) {
				t.Errorf("the index at / does not list %s:\n%s", e, index)
			}
		}
	}
}
