package pgsource_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/locktop/locktop/internal/source/pgsource"
	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/lockcore/registry"
	"github.com/locktop/locktop/model"
)

// A backend whose application_name carries an owner id (model.AppWithOwner)
// shows that id as its locks' Owner, the same field Redis and lease locks
// fill, so one holder is one party across kinds; a plain name carries none.
func TestInspectReadsOwnerFromApplicationName(t *testing.T) {
	mon := pgtest.Conn(t)
	db := currentDB(t, mon)
	ctx := context.Background()
	owned, plain := pgtest.Conn(t), pgtest.Conn(t)
	if _, err := owned.Exec(ctx, "SELECT set_config('application_name', $1, false)", model.AppWithOwner("worker", "pod-3:4711:9f2c")); err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Exec(ctx, "SELECT set_config('application_name', 'psql', false)"); err != nil {
		t.Fatal(err)
	}
	a, b := freshAgent(), freshAgent()
	for _, h := range []struct {
		c *pgx.Conn
		k lockcore.Key
	}{{owned, a}, {plain, b}} {
		if _, err := h.c.Exec(ctx, "SELECT pg_advisory_lock($1, $2)", h.k.Space(), h.k.ID()); err != nil {
			t.Fatal(err)
		}
	}
	// Names everywhere: these sessions are no project's own, and the test
	// is about owners.
	snap, err := pgsource.InspectWith(ctx, mon, registry.Everywhere())
	if err != nil {
		t.Fatal(err)
	}
	if rows := rowsOfKey(snap, db, a); len(rows) != 1 || rows[0].Owner != "pod-3:4711:9f2c" || rows[0].Session().ApplicationName != "worker" {
		t.Errorf("owned backend's lock: %+v, want application worker, owner pod-3:4711:9f2c", rows)
	}
	if rows := rowsOfKey(snap, db, b); len(rows) != 1 || rows[0].Owner != "" {
		t.Errorf("plain backend's lock: %+v, want no owner", rows)
	}
}
