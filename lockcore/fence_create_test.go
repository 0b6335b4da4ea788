package lockcore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/lockcore"
)

// Services that start at the same moment on a database without the
// fencing sequence all get their first lock: concurrent CREATE SCHEMA (or
// SEQUENCE) IF NOT EXISTS can fail on the catalog's unique index, and the
// loser must look again rather than fail the acquire. Seen in make test:
// "duplicate key value violates unique constraint pg_namespace_nspname_index".
func TestServicesCreateTheSequenceAtOnce(t *testing.T) {
	t.Parallel()
	const services = 6
	pool := pgtest.Pool(t, func(c *pgxpool.Config) { c.MaxConns = services })
	ctx := context.Background()
	for round := range 4 {
		schema := fmt.Sprintf("fence_race_%d", round)
		t.Cleanup(func() {
			_, _ = pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
		})
		start := make(chan struct{})
		errs := make(chan error, services)
		var wg sync.WaitGroup
		for range services {
			s := lockcore.New(pool, lockcore.FenceSequence(schema, "fence"))
			key := freshAgent()
			wg.Go(func() {
				<-start
				errs <- s.With(ctx, key, func(context.Context) error { return nil })
			})
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Errorf("round %d: %v", round, err)
			}
		}
	}
}
