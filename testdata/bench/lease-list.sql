-- One listing of the lease tables, as the monitor's lease source sends it
-- (internal/leasedb.ReadPostgres): generated from the package's statements by
-- LOCKTOP_WRITE_BENCH_SQL=1 go test ./internal/leasedb -run TestBenchScript
-- (TestBenchScript fails when this file and the package disagree).
-- Run: pgbench -n -M prepared -f lease-list.sql -c 1 -T 5 DBNAME
-- The schema must exist (any lease Manager opened on DBNAME creates it).
\set audit 100
\startpipeline
SELECT now();
SELECT l.lock_id, l.mode, l.owner, l.fence, l.lease_expires, l.heartbeat_ts, l.granted_at, l.grace_ms, l.metadata::text, CASE WHEN l.lease_expires < now() THEN EXISTS (SELECT 1 FROM locktop_lease.dal_jobs j WHERE j.owner = l.owner AND j.state = 'running' AND j.lease_expires > now() AND l.granted_at >= j.queued_at) ELSE false END FROM locktop_lease.dal_locks l;
SELECT lock_id, mode, owner, since, heartbeat_ts, expires FROM locktop_lease.dal_waiters WHERE expires > now();
SELECT id, owner, project, map, kind, process, state, seq, queued_at, started_at, lease_expires, heartbeat_ts FROM locktop_lease.dal_jobs ORDER BY seq;
SELECT lock_id, actor, reason, victim_owner, victim_mode, victim_fence, fence, at FROM locktop_lease.dal_audit ORDER BY id DESC LIMIT :audit;
\endpipeline
