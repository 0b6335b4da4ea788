package lockcore

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// EntryKind says how a registry entry maps onto keys.
type EntryKind int

// Registry entry kinds.
const (
	// KindSpace is a two-int namespace: every key (Space, id).
	KindSpace EntryKind = iota + 1
	// KindFixed is one fixed one-bigint key.
	KindFixed
	// KindHashed is a pattern of strings hashed with FNV1a32 into one-bigint
	// keys; its keys are spread over the whole range and cannot be named back.
	KindHashed
)

func (k EntryKind) String() string {
	switch k {
	case KindSpace:
		return "namespace"
	case KindFixed:
		return "fixed id"
	case KindHashed:
		return "FNV-1a hash"
	}
	return "EntryKind(" + strconv.Itoa(int(k)) + ")"
}

// Entry is one registered use of advisory lock keys, as seed 003's registry
// table records it.
type Entry struct {
	Name     string
	Kind     EntryKind
	ID       int64  // the space (KindSpace) or the fixed key (KindFixed)
	Pattern  string // the hash input pattern (KindHashed)
	Owner    string // component that takes the lock
	Purpose  string
	Scope    string
	LockType string // "Session (pg_advisory_lock)", ...
	FileRef  string
}

// SimSchemaID is the fixed one-bigint key the simulator takes, as a
// transaction lock, while it creates its schema, so that two simulators
// starting at once against one database take turns.
const SimSchemaID int64 = 0x4C4B5350 // "LKSP"

// Registered returns the registry: every namespace, fixed id and hash pattern
// known to locktop. The slice is a copy.
func Registered() []Entry { return append([]Entry(nil), registry...) }

// HealthProbeID is the fixed one-bigint key of locktop's health probe
// ("locktop" in ASCII): GET /healthz takes and releases it within a second,
// seed 002's health check. It lies outside the int32 range that FNV-1a
// hashed keys occupy, so it can never collide with them.
const HealthProbeID int64 = 0x006c6f636b746f70

// HealthProbeKey is the key of HealthProbeID.
func HealthProbeKey() Key { return Int64(HealthProbeID) }

// registry is the list seed 003 keeps by hand, as code. Adding a lock means
// adding a line here; TestRegistryUnique fails on a duplicate.
var registry = []Entry{
	{
		Name: "AGENT", Kind: KindSpace, ID: int64(SpaceAgent),
		Owner:    "hook routes, agent reaper, transcript reconciler, context poller, tmux watchdog, deferred stop, handoff executor, remote agent service",
		Purpose:  "Serialise all state changes of one agent (seed 000)",
		Scope:    "Per agent",
		LockType: "Session (pg_advisory_lock; background workers pg_try_advisory_lock)",
		FileRef:  "workers/",
	},
	{
		Name: "IDEMPOTENCY_CLEANUP", Kind: KindFixed, ID: 42424242,
		Owner:    "IdempotencyService",
		Purpose:  "Cleanup scheduler coordination",
		Scope:    "Global",
		LockType: "Session (pg_try_advisory_lock)",
		FileRef:  "server/src/services/idempotency.service.ts:41",
	},
	{
		Name: "SIM_SCHEMA", Kind: KindFixed, ID: SimSchemaID,
		Owner:    "simulator (workers.Setup)",
		Purpose:  "Serialise creation of the simulator's schema by simulators starting at once",
		Scope:    "Global (per database)",
		LockType: "Transaction (pg_advisory_xact_lock)",
		FileRef:  "workers/schema.go",
	},
	{
		Name: "LOCKTOP_HEALTH", Kind: KindFixed, ID: HealthProbeID,
		Owner:    "locktop serve, locktop --http (GET /healthz)",
		Purpose:  "Health probe: taken and released within 1s to prove the lock system works (seed 002)",
		Scope:    "Global",
		LockType: "Session (pg_advisory_lock, 1s timeout)",
		FileRef:  "internal/monitor/probe.go",
	},
	{
		Name: "BOOKING_DATE", Kind: KindHashed, Pattern: "{tenantId}:{date}",
		Owner:    "BookingRepository",
		Purpose:  "Booking creation race prevention",
		Scope:    "Per tenant+date",
		LockType: "Transaction (pg_advisory_xact_lock)",
		FileRef:  "server/src/adapters/prisma/booking.repository.ts:24-35",
	},
	{
		Name: "BOOKING_BALANCE", Kind: KindHashed, Pattern: "{tenantId}:balance:{bookingId}",
		Owner:    "BookingRepository",
		Purpose:  "Balance payment coordination",
		Scope:    "Per tenant+booking",
		LockType: "Transaction (pg_advisory_xact_lock)",
		FileRef:  "server/src/adapters/prisma/booking.repository.ts:41-51",
	},
}

var (
	spaces = map[int32]Entry{}
	fixed  = map[int64]Entry{}
	// registryErr is a mistake in the table above; TestRegistryUnique and
	// `locktop registry` report it. Lookups use the first of any duplicates.
	registryErr = validate(registry)
)

// CheckRegistry reports a duplicate or malformed entry in the registry.
func CheckRegistry() error { return registryErr }

func init() {
	for _, e := range registry {
		switch e.Kind {
		case KindSpace:
			if _, dup := spaces[int32(e.ID)]; !dup {
				spaces[int32(e.ID)] = e
			}
		case KindFixed:
			if _, dup := fixed[e.ID]; !dup {
				fixed[e.ID] = e
			}
		}
	}
}

// validate reports duplicate names, spaces, fixed ids and patterns, and
// spaces that do not fit in an int32.
func validate(entries []Entry) error {
	names := map[string]bool{}
	spaceIDs := map[int64]string{}
	fixedIDs := map[int64]string{}
	patterns := map[string]string{}
	for _, e := range entries {
		if e.Name == "" {
			return fmt.Errorf("lockcore registry: entry without a name")
		}
		if names[e.Name] {
			return fmt.Errorf("lockcore registry: duplicate name %q", e.Name)
		}
		names[e.Name] = true
		switch e.Kind {
		case KindSpace:
			if e.ID != int64(int32(e.ID)) {
				return fmt.Errorf("lockcore registry: %s: space %d does not fit in int4", e.Name, e.ID)
			}
			if prev, ok := spaceIDs[e.ID]; ok {
				return fmt.Errorf("lockcore registry: space %d used by both %s and %s", e.ID, prev, e.Name)
			}
			spaceIDs[e.ID] = e.Name
		case KindFixed:
			if prev, ok := fixedIDs[e.ID]; ok {
				return fmt.Errorf("lockcore registry: fixed id %d used by both %s and %s", e.ID, prev, e.Name)
			}
			fixedIDs[e.ID] = e.Name
		case KindHashed:
			if prev, ok := patterns[e.Pattern]; ok {
				return fmt.Errorf("lockcore registry: pattern %q used by both %s and %s", e.Pattern, prev, e.Name)
			}
			patterns[e.Pattern] = e.Name
		default:
			return fmt.Errorf("lockcore registry: %s: unknown kind %d", e.Name, e.Kind)
		}
	}
	return nil
}

func lookupSpace(space int32) (Entry, bool) { e, ok := spaces[space]; return e, ok }
func lookupFixed(id int64) (Entry, bool)    { e, ok := fixed[id]; return e, ok }

// WriteRegistryMarkdown writes the registry as the markdown table seed 003
// keeps by hand.
func WriteRegistryMarkdown(w io.Writer) error {
	var b strings.Builder
	b.WriteString("| Name | Key | Component | Purpose | Scope | Lock Type | File Reference |\n")
	b.WriteString("|------|-----|-----------|---------|-------|-----------|----------------|\n")
	for _, e := range registry {
		var key string
		switch e.Kind {
		case KindSpace:
			key = fmt.Sprintf("`(%d, id)`", e.ID)
		case KindFixed:
			key = fmt.Sprintf("`%d`", e.ID)
		case KindHashed:
			key = fmt.Sprintf("FNV-1a of `%s`", e.Pattern)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | `%s` |\n",
			e.Name, key, mdCell(e.Owner), mdCell(e.Purpose), mdCell(e.Scope), mdCell(e.LockType), e.FileRef)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func mdCell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
