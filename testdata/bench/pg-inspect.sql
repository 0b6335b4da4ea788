-- One poll of the monitor's PostgreSQL source, as it sends it
-- (internal/source/pglocks.SQL): generated from the package's statement by
-- LOCKTOP_WRITE_BENCH_SQL=1 go test ./internal/source/pglocks -run TestBenchScript
-- (TestBenchScript fails when this file and the package disagree).
-- Run: pgbench -n -M prepared -f pg-inspect.sql -c 1 -T 5 DBNAME
SELECT 0 AS kind, NULL::int4 AS pid, (SELECT oid FROM pg_database WHERE datname = current_database()) AS oid,
	NULL::oid AS classid, NULL::oid AS objid, NULL::int2 AS objsubid, NULL::bool AS flag,
	now() AS ts, NULL::timestamptz AS ts2, NULL::timestamptz AS ts3,
	NULL::text AS t1, NULL::text AS t2, NULL::text AS t3, NULL::text AS t4, NULL::text AS t5,
	NULL::oid AS relation, NULL::int4 AS page, NULL::int2 AS tuple, NULL::xid AS xid
UNION ALL
SELECT NULL, pid, database, classid, objid, objsubid, granted, waitstart, NULL, NULL, locktype, mode,
	CASE WHEN relation IS NOT NULL AND (NOT granted OR locktype = 'tuple')
		AND database IN (0, (SELECT oid FROM pg_database WHERE datname = current_database())) THEN
		(pg_identify_object('pg_class'::regclass, relation, 0)).identity END,
	virtualxid, NULL, relation, page, tuple, transactionid
FROM pg_locks WHERE NOT fastpath
UNION ALL
SELECT 2, a.pid, a.datid, NULL, NULL, NULL, coalesce(a.backend_type, 'client backend') = 'client backend',
	a.query_start, a.state_change, a.xact_start,
	a.usename::text, a.application_name, host(a.client_addr), a.state, a.query, NULL, NULL, NULL, NULL
FROM pg_stat_activity a
UNION ALL
SELECT 3, NULL, d.oid, NULL, NULL, NULL, NULL, NULL, NULL, NULL, d.datname::text, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM pg_database d
UNION ALL
SELECT 5, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
	(SELECT sum(sessions_killed) FROM pg_stat_database)::text, NULL, NULL, NULL, NULL, NULL, NULL;
