package registry

// SpaceAgent is the space of the AGENT namespace: one lock per agent, taken
// by every mutating hook route and every background worker (seed 001).
const SpaceAgent int32 = 1

// IdempotencyCleanupID is the fixed key of seed 003's cleanup scheduler.
const IdempotencyCleanupID int64 = 42424242

// SimSchemaID is the fixed one-bigint key the simulator takes, as a
// transaction lock, while it creates its schema, so that two simulators
// starting at once against one database take turns ("LKSP").
const SimSchemaID int64 = 0x4C4B5350

// HealthProbeID is the fixed one-bigint key of locktop's health probe
// ("locktop" in ASCII): GET /healthz takes and releases it within a second,
// seed 002's health check. It lies outside the int32 range that FNV-1a
// hashed keys occupy, so it can never collide with them.
const HealthProbeID int64 = 0x006c6f636b746f70

// SessionPattern is seed 002's session-mutex key, as a pattern: the lock of
// one conversation stream. Written literally, its braces would be a Redis
// Cluster hash tag, so it is a pattern here and never the stored text.
const SessionPattern = "sesslock:{tenant}:{agent}:{customer}:{channel}"

// entries is the list seed 003 keeps by hand, as code, widened to every lock
// kind. Adding a lock means adding a line here; Check fails on a duplicate.
var entries = []Entry{
	{
		Name: "AGENT", Kind: Space, ID: int64(SpaceAgent),
		Owner:    "hook routes, agent reaper, transcript reconciler, context poller, tmux watchdog, deferred stop, handoff executor, remote agent service",
		Purpose:  "Serialise all state changes of one agent (the agent hooks' advisory locking)",
		Scope:    "Per agent",
		LockType: "Session (pg_advisory_lock; background workers pg_try_advisory_lock)",
		FileRef:  "workers/",
	},
	{
		Name: "IDEMPOTENCY_CLEANUP", Kind: Fixed, ID: IdempotencyCleanupID,
		Owner:    "IdempotencyService",
		Purpose:  "Cleanup scheduler coordination",
		Scope:    "Global",
		LockType: "Session (pg_try_advisory_lock)",
		FileRef:  "server/src/services/idempotency.service.ts:41",
	},
	{
		Name: "SIM_SCHEMA", Kind: Fixed, ID: SimSchemaID,
		Owner:    "simulator (workers.Setup)",
		Purpose:  "Serialise creation of the simulator's schema by simulators starting at once",
		Scope:    "Global (per database)",
		LockType: "Transaction (pg_advisory_xact_lock)",
		FileRef:  "workers/schema.go",
	},
	{
		Name: "LOCKTOP_HEALTH", Kind: Fixed, ID: HealthProbeID,
		Owner:    "locktop serve, locktop --http (GET /healthz)",
		Purpose:  "Health probe: taken and released within 1s to prove the lock system works (the ACF session mutex)",
		Scope:    "Global",
		LockType: "Session (pg_advisory_lock, 1s timeout)",
		FileRef:  "internal/source/pgsource/probe.go",
	},
	{
		Name: "BOOKING_DATE", Kind: Hashed, Pattern: "{tenantId}:{date}",
		Owner:    "BookingRepository",
		Purpose:  "Booking creation race prevention",
		Scope:    "Per tenant+date",
		LockType: "Transaction (pg_advisory_xact_lock)",
		FileRef:  "server/src/adapters/prisma/booking.repository.ts:24-35",
	},
	{
		Name: "BOOKING_BALANCE", Kind: Hashed, Pattern: "{tenantId}:balance:{bookingId}",
		Owner:    "BookingRepository",
		Purpose:  "Balance payment coordination",
		Scope:    "Per tenant+booking",
		LockType: "Transaction (pg_advisory_xact_lock)",
		FileRef:  "server/src/adapters/prisma/booking.repository.ts:41-51",
	},
	{
		Name: "SESSION", Kind: RedisKey, Pattern: SessionPattern,
		Owner:    "Agent Conversation Fabric (LogicalTurnWorkflow)",
		Purpose:  "Single-writer rule: one brain execution per conversation stream (the ACF session mutex)",
		Scope:    "Per tenant+agent+customer+channel",
		LockType: "Redis SET NX PX with an owner token (30s TTL; 300s across workflow steps)",
		FileRef:  "lockcore/redislock/",
	},
	{
		Name: "PROJECT", Kind: LeaseLevel, ID: 1, Pattern: "project:{projectId}",
		Owner:    "DAL (project metadata, bulk jobs, permissions, templates, imports)",
		Purpose:  "Project-level read/write/upgradeable lease (the FOLE lease locks)",
		Scope:    "Per project",
		LockType: "Lease row (dal_locks), heartbeat",
		FileRef:  "lockcore/lease/",
	},
	{
		Name: "MAP", Kind: LeaseLevel, ID: 2, Pattern: "map:{mapId}",
		Owner:    "DAL (calibration, tile generation, imports, viewer, export)",
		Purpose:  "Map-level read/write/upgradeable lease (the FOLE lease locks)",
		Scope:    "Per map",
		LockType: "Lease row (dal_locks), heartbeat",
		FileRef:  "lockcore/lease/",
	},
	{
		Name: "SKETCH", Kind: LeaseLevel, ID: 3, Pattern: "sketch:{sketchId}",
		Owner:    "DAL (sketch edits, hit-testing, measurement)",
		Purpose:  "Sketch-level read/write/upgradeable lease (the FOLE lease locks)",
		Scope:    "Per sketch",
		LockType: "Lease row (dal_locks), heartbeat",
		FileRef:  "lockcore/lease/",
	},
}
