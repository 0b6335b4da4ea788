SELECT l.lock_id, l.mode, l.owner, l.fence, l.lease_expires, l.heartbeat_ts, l.granted_at, l.grace_ms, l.metadata::text FROM locktop_lease.dal_locks l;
