-- One lease lock cycle (acquire + release, uncontended), as lockcore/lease
-- sends it to PostgreSQL: generated from the package's statements by
-- LOCKTOP_WRITE_BENCH_SQL=1 go test ./lockcore/lease -run TestBenchScript
-- (TestBenchScript fails when this file and the package disagree).
-- Run: pgbench -n -M prepared -f lease-cycle.sql -c 1 -T 5 -D mode=write \
--        -D owner=bench -D chan=locktop_lease -D conflicting={read,write,upgradeable} \
--        -D precedence=false DBNAME
-- The schema must exist (any lease Manager opened on DBNAME creates it).
\set id random(1, 10000)
\set tok random(1, 1000000000000000)
\set lease 30000000
\set grace 20000
\set wid random(1, 1000000000000000)
\set ttl 10000000
\startpipeline
INSERT INTO locktop_lease.dal_resources AS r (lock_id, fence) VALUES (:id, 1) ON CONFLICT (lock_id) DO UPDATE SET fence = r.fence + 1 RETURNING fence, now();
SELECT 'h', l.token, l.mode, l.owner, l.fence, l.lease_expires, l.heartbeat_ts, EXISTS (SELECT 1 FROM locktop_lease.dal_jobs j WHERE j.owner = l.owner AND j.state = 'running' AND j.lease_expires > now() AND l.granted_at >= j.queued_at) FROM locktop_lease.dal_locks l WHERE l.lock_id = :id UNION ALL SELECT 'w', w.id, w.mode, w.owner, 0, w.expires, w.expires, false FROM locktop_lease.dal_waiters w WHERE w.lock_id = :id;
INSERT INTO locktop_lease.dal_locks (token, lock_id, fence, mode, owner, lease_expires, heartbeat_ts, granted_at, grace_ms) SELECT :tok, :id, r.fence, :mode, :owner, now() + :lease * interval '1 microsecond', now(), now(), :grace FROM locktop_lease.dal_resources r WHERE r.lock_id = :id AND NOT EXISTS (SELECT 1 FROM locktop_lease.dal_locks WHERE lock_id = :id AND mode = ANY(:conflicting::text[])) AND NOT (:precedence::bool AND EXISTS (SELECT 1 FROM locktop_lease.dal_waiters WHERE lock_id = :id AND mode = 'write' AND expires > now() AND id <> :wid)) RETURNING fence, lease_expires, granted_at, set_config('synchronous_commit', 'on', true);
INSERT INTO locktop_lease.dal_waiters (id, lock_id, mode, owner, since, heartbeat_ts, expires) SELECT :wid, :id, :mode, :owner, now(), now(), now() + :ttl * interval '1 microsecond' WHERE NOT EXISTS (SELECT 1 FROM locktop_lease.dal_locks WHERE token = :tok) ON CONFLICT (id) DO UPDATE SET heartbeat_ts = now(), expires = excluded.expires;
\endpipeline
\startpipeline
SELECT 1 FROM locktop_lease.dal_resources WHERE lock_id = :id FOR SHARE;
DELETE FROM locktop_lease.dal_locks WHERE token = :tok;
SELECT pg_notify(:chan, :id) WHERE EXISTS (SELECT 1 FROM locktop_lease.dal_waiters WHERE lock_id = :id AND expires > now());
\endpipeline
