package lockcore

import (
	"io"

	"github.com/locktop/locktop/lockcore/registry"
)

// The names of keys live in package registry, which every lock kind of
// this project registers in. What follows keeps the earlier API working.

// Entry is a registry entry.
//
// Deprecated: use registry.Entry.
type Entry = registry.Entry

// EntryKind says how a registry entry maps onto keys.
//
// Deprecated: use registry.Kind.
type EntryKind = registry.Kind

// Registry entry kinds.
//
// Deprecated: use registry.Space, registry.Fixed and registry.Hashed.
const (
	KindSpace  = registry.Space
	KindFixed  = registry.Fixed
	KindHashed = registry.Hashed
)

// SpaceAgent is the space of the AGENT namespace.
//
// Deprecated: use registry.SpaceAgent.
const SpaceAgent = registry.SpaceAgent

// SimSchemaID is the simulator's schema lock.
//
// Deprecated: use registry.SimSchemaID.
const SimSchemaID = registry.SimSchemaID

// HealthProbeID is the health probe's key.
//
// Deprecated: use registry.HealthProbeID.
const HealthProbeID = registry.HealthProbeID

// HealthProbeKey is the key of registry.HealthProbeID.
func HealthProbeKey() Key { return Int64(registry.HealthProbeID) }

// Registered returns every registry entry.
//
// Deprecated: use registry.Entries.
func Registered() []Entry { return registry.Entries() }

// CheckRegistry reports a duplicate or malformed registry entry.
//
// Deprecated: use registry.Check.
func CheckRegistry() error { return registry.Check() }

// WriteRegistryMarkdown writes the registry as a markdown table.
//
// Deprecated: use registry.WriteMarkdown.
func WriteRegistryMarkdown(w io.Writer) error { return registry.WriteMarkdown(w) }
