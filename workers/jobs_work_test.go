package workers

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/locktop/locktop/lockcore/lease"
	"github.com/locktop/locktop/model"
)

// A lease lost while a job's body failed is counted as lost: the
// family's With joins the release's error (ErrLost) to the body's, as
// lockcore.With and redislock.With do, instead of dropping it.
func TestLeaseLostWhileBodyFailsIsLost(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "leases.db")
	m, err := lease.OpenSQLite(ctx, path, lease.Options{Owner: "job", Wait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	body := errors.New("the job's body failed")
	err = m.With(ctx, lease.Map("m1"), lease.Write, func(ctx context.Context) error {
		// The grant disappears under the job, as when another node
		// recovers it as stale.
		if _, err := db.ExecContext(ctx, "DELETE FROM dal_locks"); err != nil {
			t.Fatal(err)
		}
		return body
	})
	if !errors.Is(err, body) || !errors.Is(err, lease.ErrLost) {
		t.Fatalf("With: %v; want the body's error and ErrLost", err)
	}
	if o := classify(ctx, err); o != model.OutcomeLost {
		t.Errorf("counted as %v, want lost", o)
	}
}
