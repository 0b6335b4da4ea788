package workers

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
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

// Stall marks its grant released unless With's error holds a failed
// release: a takeover before the release is one, a lease that merely ran
// out (the lock's own loss, the row freed by the release) is not.
func TestReleaseFailed(t *testing.T) {
	r := lease.Map("m")
	lost := fmt.Errorf("%w: map:m write (fence 3): lease passed", lease.ErrLost)
	takenOver := &lease.Error{Op: "release", Resource: r, Err: fmt.Errorf("%w: fence 3 was taken over", lease.ErrLost)}
	body := fmt.Errorf("map:m: after the stall: %w", lost)
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{lost, false},
		{errors.Join(body, lost), false},
		{errors.Join(body, takenOver), true},
		{errors.Join(&lease.Error{Op: "write", Resource: r, Err: errors.New("disk full")}, fmt.Errorf("again: %w", takenOver)), true},
		{&lease.Error{Op: "acquire", Resource: r, Err: lease.ErrTimeout}, false},
	} {
		if got := releaseFailed(c.err); got != c.want {
			t.Errorf("releaseFailed(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
