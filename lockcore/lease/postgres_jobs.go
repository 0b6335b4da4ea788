package lease

// The PostgreSQL store's jobs (the queue, the caps' schedule) and the
// atomic-write manifest: the store's other half beside postgres.go's locks.

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/locktop/locktop/internal/leasedb"
)

func (p *pgStore) enqueue(ctx context.Context, j jobRow, lease time.Duration) (bool, error) {
	tag, err := p.pool.Exec(ctx, p.q(pgEnqueue), j.id, j.owner, j.project, j.mapID, j.kind, j.process, lease.Microseconds())
	return tag.RowsAffected() == 1, err
}

func (p *pgStore) schedule(ctx context.Context, plan func(time.Time, []jobRow, map[string]int64) jobPlan) ([]jobRow, error) {
	conn, err := p.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(p.q(pgJobGate))
	b.Queue(p.q(pgJobs))
	b.Queue(p.q(pgTurns))
	br := conn.SendBatch(ctx, b)
	var now time.Time
	var jobs []jobRow
	served := map[string]int64{}
	err = func() error {
		if _, err := br.Exec(); err != nil {
			return err
		}
		if err := br.QueryRow().Scan(&now); err != nil {
			return err
		}
		rows, err := br.Query()
		if err != nil {
			return err
		}
		if jobs, err = pgx.CollectRows(rows, scanPGJob); err != nil {
			return err
		}
		rows, err = br.Query()
		if err != nil {
			return err
		}
		var project string
		var turn int64
		_, err = pgx.ForEachRow(rows, []any{&project, &turn}, func() error {
			served[project] = turn
			return nil
		})
		return err
	}()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	pl := plan(now, jobs, served)
	b = &pgx.Batch{}
	if pl.changed() {
		// A start is a grant: durable before StartJob reports it, or a
		// crash of a server that commits asynchronously takes it back and
		// another job starts beside this one, over the caps (pgDurable).
		b.Queue("SELECT " + pgDurable)
		b.Queue(p.q(pgDropJobs), pl.drop)
		b.Queue(p.q(pgStartJobs), pl.start)
		projects, turns := make([]string, 0, len(pl.served)), make([]int64, 0, len(pl.served))
		for project, turn := range pl.served {
			projects, turns = append(projects, project), append(turns, turn)
		}
		b.Queue(p.q(pgSetTurn), projects, turns)
		b.Queue(pgNotify, p.channel, jobsKey)
	}
	b.Queue("COMMIT")
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return nil, err
	}
	return pl.after(jobs), nil
}

func scanPGJob(row pgx.CollectableRow) (jobRow, error) {
	j, err := leasedb.ScanPGJob(row)
	return jobRowOf(j), err
}

func (p *pgStore) jobRunning(ctx context.Context, id string) (running, exists bool, err error) {
	var state string
	err = p.pool.QueryRow(ctx, p.q(pgJobState), id).Scan(&state)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, false, nil
	}
	return isRunning(state), err == nil, err
}

func (p *pgStore) finish(ctx context.Context, id string) (bool, error) {
	tag, err := p.pool.Exec(ctx, p.q(pgFinish), id, p.channel, jobsKey)
	return tag.RowsAffected() == 1, err
}

func (p *pgStore) commitManifest(ctx context.Context, token, lockID, name, path string, fence int64) (time.Time, error) {
	var at time.Time
	err := p.pool.QueryRow(ctx, p.q(pgCommitManifest), token, lockID, name, path, fence).Scan(&at, nil)
	if errors.Is(err, pgx.ErrNoRows) {
		return at, errManifestRefused
	}
	return at, err
}

func (p *pgStore) manifest(ctx context.Context, lockID, name string) (ManifestEntry, bool, error) {
	e := ManifestEntry{Name: name}
	err := p.pool.QueryRow(ctx, p.q(pgManifest), lockID, name).Scan(&e.Path, &e.Fence, &e.State, &e.Committed)
	if errors.Is(err, pgx.ErrNoRows) {
		return e, false, nil
	}
	return e, err == nil, err
}

func (p *pgStore) holdsWrite(ctx context.Context, token, lockID string) (bool, error) {
	var ok bool
	err := p.pool.QueryRow(ctx, p.q(pgHoldsWrite), token, lockID).Scan(&ok)
	return ok, err
}
