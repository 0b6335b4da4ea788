package pgsource_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/locktop/locktop/internal/source/pgsource"
	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/lockcore/registry"
	"github.com/locktop/locktop/model"
)

// pg_advisory_lock(1, 7) taken by someone else's session in someone else's
// database is (1, 7), not AGENT 7: the built-in names apply where this
// project's own sessions hold or wait for the key. A user's registry
// names keys in the databases it says, and only there; the monitor (not
// only Inspect) names with it.
func TestNamesApplyWhereTheyBelong(t *testing.T) {
	ctx := context.Background()
	admin := pgtest.AdminDSN(t)
	db := fmt.Sprintf("stranger_%d", nextID.Add(1))
	adm, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close(ctx)
	if _, err := adm.Exec(ctx, "CREATE DATABASE "+db); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = adm.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)") })
	dsn, err := pgtest.WithDatabase(admin, db)
	if err != nil {
		t.Fatal(err)
	}
	stranger := func(app string) *pgx.Conn {
		cfg, err := pgx.ParseConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		cfg.RuntimeParams["application_name"] = app
		c, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(context.Background()) })
		return c
	}
	id := 7000 + nextID.Add(1)
	theirs := stranger("billing-worker")
	if _, err := theirs.Exec(ctx, "SELECT pg_advisory_lock(1, $1), pg_advisory_lock(42424242)", id); err != nil {
		t.Fatal(err)
	}
	ours := stranger("locktop.lock")
	if _, err := ours.Exec(ctx, "SELECT pg_advisory_lock(1, $1)", id+1); err != nil {
		t.Fatal(err)
	}

	find := func(snap model.Snapshot, entity int64) []string {
		var keys []string
		for _, l := range snap.Locks {
			if l.Database == db && l.Kind == model.KindAdvisory && l.EntityID == entity {
				keys = append(keys, l.KeyLabel())
			}
		}
		return keys
	}
	mon := pgtest.Conn(t)
	snap, err := pgsource.Inspect(ctx, mon)
	if err != nil {
		t.Fatal(err)
	}
	for entity, want := range map[int64]string{int64(id): fmt.Sprintf("1 %d", id), 42424242: "42424242", int64(id + 1): fmt.Sprintf("AGENT %d", id+1)} {
		if got := find(snap, entity); len(got) != 1 || got[0] != want {
			t.Errorf("key %d in a stranger's database shows as %q, want %q", entity, got, want)
		}
	}

	// Their own registry, scoped to their database.
	user, err := registry.New([]registry.Entry{
		{Name: "BILLING", Kind: registry.Space, ID: 1, Databases: []string{db}},
		{Name: "NIGHTLY", Kind: registry.Fixed, ID: 42424242, Databases: []string{"elsewhere"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	m, err := pgsource.Connect(ctx, pgtest.DSN(t), pgsource.Options{Registry: registry.Join(user, registry.Builtin())})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	snap, err = m.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := find(snap, int64(id)); len(got) != 1 || got[0] != fmt.Sprintf("BILLING %d", id) {
		t.Errorf("with their registry, (1, %d) shows as %q", id, got)
	}
	if got := find(snap, 42424242); len(got) != 1 || got[0] != "42424242" || strings.Contains(got[0], "NIGHTLY") {
		t.Errorf("an entry of another database named 42424242: %q", got)
	}
}
