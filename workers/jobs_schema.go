package workers

// jobsDDL holds what seed 004's checks need: the holds registered by every
// section on a lease resource (the writer-exclusion check), the jobs
// running (the caps check) and the sketches' versions. Setup runs it with
// the rest; every statement is idempotent.
const jobsDDL = `
CREATE TABLE IF NOT EXISTS lease_resources (id text PRIMARY KEY);
CREATE TABLE IF NOT EXISTS lease_holds (
	id       bigserial PRIMARY KEY,
	resource text NOT NULL,
	mode     text NOT NULL,
	fence    bigint NOT NULL,
	worker   text NOT NULL,
	proc     text NOT NULL,
	entered  timestamptz NOT NULL DEFAULT clock_timestamp(),
	lost     bool NOT NULL DEFAULT false
);
CREATE INDEX IF NOT EXISTS lease_holds_resource ON lease_holds (resource);
CREATE TABLE IF NOT EXISTS lease_jobs (
	id      bigserial PRIMARY KEY,
	job     text NOT NULL,
	project text NOT NULL,
	map     text NOT NULL DEFAULT '',
	proc    text NOT NULL,
	at      timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE TABLE IF NOT EXISTS sketches (
	id      text PRIMARY KEY,
	version bigint NOT NULL DEFAULT 0
);

-- enter_hold registers a section holding p_resource in p_mode (under the
-- lease grant p_fence; 0 without a lock) and returns the other live holds
-- that conflict with it: a write beside anything, or two upgradeable
-- holds. The resource's row lock serialises the entries, so two
-- conflicting sections never miss each other. A hold of another process
-- counts only while that process's live session is connected (see
-- enter_section); p_except is a hold of the caller's that the new one
-- replaces (an upgrade).
CREATE OR REPLACE FUNCTION enter_hold(p_resource text, p_mode text, p_fence bigint, p_worker text, p_proc text, p_except bigint,
	OUT hold_id bigint, OUT other_ids bigint[], OUT other_fences bigint[], OUT other_who text[])
LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO lease_resources (id) VALUES (p_resource) ON CONFLICT DO NOTHING;
	PERFORM 1 FROM lease_resources WHERE id = p_resource FOR UPDATE;
	INSERT INTO lease_holds (resource, mode, fence, worker, proc) VALUES (p_resource, p_mode, p_fence, p_worker, p_proc)
	RETURNING id INTO hold_id;
	SELECT coalesce(array_agg(h.id ORDER BY h.id), '{}'), coalesce(array_agg(h.fence ORDER BY h.id), '{}'),
		coalesce(array_agg(format('%s %s, fence %s', h.worker, h.mode, h.fence) ORDER BY h.id), '{}')
	INTO other_ids, other_fences, other_who
	FROM lease_holds h
	WHERE h.resource = p_resource AND h.id <> hold_id AND h.id IS DISTINCT FROM p_except AND NOT h.lost
		AND (p_mode = 'write' OR h.mode = 'write' OR (p_mode = 'upgradeable' AND h.mode = 'upgradeable'))
		AND h.entered > pg_postmaster_start_time()
		AND (h.proc = p_proc OR EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.application_name = '` + LiveAppPrefix + `' || h.proc));
END $$;
`
