package workers

import (
	"context"
	"fmt"
	"regexp"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/lockcore/registry"
)

// DefaultSchema is the PostgreSQL schema the workloads own.
const DefaultSchema = "locktop_sim"

// Fields are the read-modify-write counters each agent has. Each is read in
// one statement and written in a later one, with work in between, as the
// seed's ORM code does; without the agent lock two writers lose an update.
var Fields = []string{"applied", "ready", "generation", "tools", "progress", "notifications", "subagents", "polls", "checks", "reaps"}

// fenceCode is the SQLSTATE check_fence raises for a stale fence.
const fenceCode = "LT409"

var schemaName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// ValidSchema reports whether name can be used as the workloads' schema: a
// plain lower-case identifier.
func ValidSchema(name string) error {
	if !schemaName.MatchString(name) {
		return fmt.Errorf("workers: schema name %q: use lower-case letters, digits and _ (at most 63)", name)
	}
	return nil
}

// ddl creates the tables; every statement is idempotent. It runs with
// search_path set to the schema.
const ddl = `
CREATE TABLE IF NOT EXISTS agents (
	id                 int PRIMARY KEY,
	state              text NOT NULL DEFAULT 'idle',
	session_no         int NOT NULL DEFAULT 1,
	prompt_injected_at timestamptz,
	current_command    bigint,
	current_turn       bigint,
	context_pct        int NOT NULL DEFAULT 0,
	last_seen          timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS counters (
	agent_id int NOT NULL,
	field    text NOT NULL,
	value    bigint NOT NULL DEFAULT 0,
	PRIMARY KEY (agent_id, field)
);
CREATE TABLE IF NOT EXISTS rmw_log (
	agent_id int NOT NULL,
	field    text NOT NULL,
	after    bigint NOT NULL,
	worker   text NOT NULL,
	proc     text NOT NULL,
	at       timestamptz NOT NULL DEFAULT now()
);
ALTER TABLE rmw_log ADD COLUMN IF NOT EXISTS reported bool NOT NULL DEFAULT false;
CREATE INDEX IF NOT EXISTS rmw_log_value ON rmw_log (agent_id, field, after);
CREATE INDEX IF NOT EXISTS rmw_log_proc ON rmw_log (proc);
CREATE TABLE IF NOT EXISTS sections (
	id       bigserial PRIMARY KEY,
	agent_id int NOT NULL,
	worker   text NOT NULL,
	proc     text NOT NULL,
	entered  timestamptz NOT NULL DEFAULT clock_timestamp(),
	lost     bool NOT NULL DEFAULT false
);
CREATE INDEX IF NOT EXISTS sections_agent ON sections (agent_id);
CREATE TABLE IF NOT EXISTS transcript (
	event_id text PRIMARY KEY,
	agent_id int NOT NULL,
	route    text NOT NULL,
	proc     text NOT NULL,
	applied  bool NOT NULL DEFAULT false,
	at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS transcript_pending ON transcript (at) WHERE NOT applied;
CREATE INDEX IF NOT EXISTS transcript_proc ON transcript (proc);
CREATE TABLE IF NOT EXISTS ledger (
	id         bigserial PRIMARY KEY,
	event_id   text NOT NULL,
	agent_id   int NOT NULL,
	route      text NOT NULL,
	applied_by text NOT NULL,
	at         timestamptz NOT NULL DEFAULT now()
);
ALTER TABLE ledger ADD COLUMN IF NOT EXISTS reported bool NOT NULL DEFAULT false;
CREATE INDEX IF NOT EXISTS ledger_event ON ledger (event_id);
CREATE TABLE IF NOT EXISTS commands (
	id           bigserial PRIMARY KEY,
	agent_id     int NOT NULL,
	state        text NOT NULL DEFAULT 'RUNNING',
	completed_by text,
	created      timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS turns (
	id         bigserial PRIMARY KEY,
	agent_id   int NOT NULL,
	command_id bigint,
	summary    text,
	created    timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS claims (
	kind    text NOT NULL,
	subject text NOT NULL,
	worker  text NOT NULL,
	proc    text NOT NULL,
	at      timestamptz NOT NULL DEFAULT now()
);
ALTER TABLE claims ADD COLUMN IF NOT EXISTS n int NOT NULL DEFAULT 1;
CREATE INDEX IF NOT EXISTS claims_subject ON claims (kind, subject);
CREATE INDEX IF NOT EXISTS claims_proc ON claims (proc);
-- claim_counts numbers the claims on a subject. Its primary key makes a
-- second claim wait for the first one's transaction, so the count is exact
-- even when the first claim is not committed yet (a summariser claims its
-- call inside the transaction that holds the turn).
CREATE TABLE IF NOT EXISTS claim_counts (
	kind    text NOT NULL,
	subject text NOT NULL,
	n       int NOT NULL,
	PRIMARY KEY (kind, subject)
);

-- fence is the newest lock fence that entered a section of the agent
-- (raised only upward): a write of a section with an older fence is
-- refused (check_fence).
ALTER TABLE agents ADD COLUMN IF NOT EXISTS fence bigint NOT NULL DEFAULT 0;
-- pid and fence are those of the section's lock (NULL and 0 without one).
ALTER TABLE sections ADD COLUMN IF NOT EXISTS pid int;
ALTER TABLE sections ADD COLUMN IF NOT EXISTS fence bigint NOT NULL DEFAULT 0;
-- at is when the subject was last claimed: a run counts only the claims
-- made since it began.
ALTER TABLE claim_counts ADD COLUMN IF NOT EXISTS at timestamptz NOT NULL DEFAULT clock_timestamp();
CREATE INDEX IF NOT EXISTS claims_at ON claims (at);
CREATE INDEX IF NOT EXISTS transcript_proc_at ON transcript (proc, at);

-- holds_agent reports whether backend p_pid holds the advisory lock of
-- agent p_agent (space p_space) in this database now.
CREATE OR REPLACE FUNCTION holds_agent(p_space int, p_agent int, p_pid int) RETURNS bool
LANGUAGE sql STABLE AS $$
	SELECT EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.pid = p_pid AND l.granted
		AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
		AND l.classid = p_space::oid AND l.objid = p_agent::oid AND l.objsubid = 2)
$$;

-- check_fence takes the agent's row FOR SHARE and raises LT409 unless the
-- agent's fence is at most p_fence. Sent first in the transaction of a
-- fenced write, it makes the write wait for a fence raise under way (an
-- entering section's row lock) and refuses it once a newer fence is in.
CREATE OR REPLACE FUNCTION check_fence(p_agent int, p_fence bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
	PERFORM 1 FROM agents WHERE id = p_agent AND fence <= p_fence FOR SHARE;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'agent %: fence % is stale: a newer lock grant has entered', p_agent, p_fence USING ERRCODE = '` + fenceCode + `';
	END IF;
END $$;

-- enter_section registers a critical section of an agent, raises the
-- agent's fence to the section's, and counts the other sections inside.
-- The row lock on the agent serialises concurrent entries with each other
-- and with fenced writes (each statement of a volatile function sees what
-- committed before it), so two overlapping sections never miss each other.
--
-- Another section counts as inside (an overlap) only if it is live:
--   - one that holds a lock (pid set) is live while its backend still
--     holds the agent's lock and its fence is not older than the agent's;
--     otherwise its lock was lost and it runs on (lost_who names it; it is
--     marked lost, and its fenced writes are refused): not an overlap;
--   - one without a lock (locks off) is live while its process is: a
--     section of another process counts only while that process's live
--     session (see Env.Join) is connected, so a process killed inside a
--     section leaves no false overlap behind;
--   - rows older than the server's start are left from before a restart:
--     every session of that time is gone.
-- stale says the entering section's own lock is already lost (its fence
-- is older than the agent's, or its backend no longer holds the lock while
-- others are inside): it must not write.
DROP FUNCTION IF EXISTS enter_section(int, text, text, interval);
CREATE OR REPLACE FUNCTION enter_section(p_agent int, p_worker text, p_proc text, p_horizon interval,
	p_space int, p_pid int, p_fence bigint,
	OUT section_id bigint, OUT others bigint, OUT who text, OUT lost_who text, OUT stale bool)
LANGUAGE plpgsql AS $$
DECLARE
	cur  bigint;
	gone bigint[];
BEGIN
	SELECT a.fence INTO cur FROM agents a WHERE a.id = p_agent FOR UPDATE;
	stale := p_fence > 0 AND cur > p_fence;
	IF p_fence > cur THEN
		UPDATE agents SET fence = p_fence WHERE id = p_agent;
		cur := p_fence;
	END IF;
	INSERT INTO sections (agent_id, worker, proc, pid, fence) VALUES (p_agent, p_worker, p_proc, p_pid, p_fence)
	RETURNING id INTO section_id;
	SELECT count(*) FILTER (WHERE o.live), coalesce(string_agg(o.worker, ',') FILTER (WHERE o.live), ''),
		coalesce(string_agg(format('%s, pid %s, fence %s', o.worker, o.pid, o.fence), '; ') FILTER (WHERE NOT o.live), ''),
		coalesce(array_agg(o.id) FILTER (WHERE NOT o.live), '{}')
	INTO others, who, lost_who, gone
	FROM (
		SELECT s.id, s.worker, s.pid, s.fence,
			s.pid IS NULL OR ((s.fence = 0 OR s.fence >= cur) AND holds_agent(p_space, p_agent, s.pid)) AS live
		FROM sections s
		WHERE s.agent_id = p_agent AND s.id <> section_id AND NOT s.lost
			AND s.entered > greatest(clock_timestamp() - p_horizon, pg_postmaster_start_time())
			AND (s.proc = p_proc OR EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.application_name = '` + LiveAppPrefix + `' || s.proc))
	) o;
	IF others > 0 AND p_pid IS NOT NULL AND NOT stale AND NOT holds_agent(p_space, p_agent, p_pid) THEN
		-- Two holders of one exclusive lock cannot both hold it: the
		-- entering one lost its lock before it came in.
		stale := true;
	END IF;
	IF stale THEN
		others := 0;
		who := '';
		gone := gone || section_id;
	END IF;
	IF cardinality(gone) > 0 THEN
		UPDATE sections SET lost = true WHERE id = ANY (gone);
	END IF;
END $$;
`

// Setup creates the schema and its tables if they do not exist. Two
// processes may call it at once: it runs in one transaction under the
// SIM_SCHEMA advisory lock, so they take turns.
func Setup(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	if err := ValidSchema(schema); err != nil {
		return err
	}
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := lockcore.XactLock(ctx, tx, lockcore.Int64(registry.SimSchemaID)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{schema}.Sanitize()); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "SELECT set_config('search_path', $1, true)", schema); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, ddl+turnsDDL+jobsDDL)
		return err
	})
	if err != nil {
		return fmt.Errorf("workers: setting up schema %s: %w", schema, err)
	}
	return nil
}

// Drop removes the schema and everything in it.
func Drop(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	if err := ValidSchema(schema); err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := lockcore.XactLock(ctx, tx, lockcore.Int64(registry.SimSchemaID)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
		return err
	})
}

// EnsureAgents makes sure agents 1..n exist with their counters. Existing
// agents are left as they are, so processes sharing the schema share them.
func EnsureAgents(ctx context.Context, db *DB, n int) error {
	if n < 1 {
		return fmt.Errorf("workers: need at least one agent, not %d", n)
	}
	_, err := db.Exec(ctx, `
		WITH a AS (INSERT INTO agents (id) SELECT g FROM generate_series(1, $1::int) g ON CONFLICT DO NOTHING)
		INSERT INTO counters (agent_id, field)
		SELECT g, f FROM generate_series(1, $1::int) g, unnest($2::text[]) f
		ON CONFLICT DO NOTHING`, n, Fields)
	if err != nil {
		return fmt.Errorf("workers: creating %d agents: %w", n, err)
	}
	return nil
}
