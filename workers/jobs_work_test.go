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

// A lease lost while a job's body failed is counted as lost: releaseAfter
// joins the release's error (ErrLost) to the body's, as lockcore.With and
// redislock.With do, instead of dropping it.
func TestReleaseAfterKeepsTheLoss(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "leases.db")
	m, err := lease.OpenSQLite(ctx, path, lease.Options{Owner: "job", Wait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	l, err := m.Acquire(ctx, lease.Map("m1"), lease.Write)
	if err != nil {
		t.Fatal(err)
	}
	// The grant disappears under the job, as when another node recovers
	// it as stale.
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "DELETE FROM dal_locks"); err != nil {
		t.Fatal(err)
	}
	body := errors.New("the job's body failed")
	err = releaseAfter(ctx, []*lease.Lock{l}, body)
	if !errors.Is(err, body) || !errors.Is(err, lease.ErrLost) {
		t.Fatalf("releaseAfter: %v; want the body's error and ErrLost", err)
	}
	if o := classify(ctx, err); o != model.OutcomeLost {
		t.Errorf("counted as %v, want lost", o)
	}
}
