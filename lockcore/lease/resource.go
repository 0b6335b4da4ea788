package lease

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"

	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/lockcore/registry"
)

// Level is a level of resources in the global lock order of seed 004 §8.1:
// projects, then maps, then sketches.
type Level int

// The three levels, in lock order.
const (
	LevelProject Level = iota + 1
	LevelMap
	LevelSketch
)

// levelNames ties each Level to its registry entry (kind LeaseLevel); the
// entry gives the lock_id prefix and the level's place in the order.
var levelNames = map[Level]string{LevelProject: "PROJECT", LevelMap: "MAP", LevelSketch: "SKETCH"}

// levels holds each Level's registry entry.
var levels = func() map[Level]registry.Entry {
	out := map[Level]registry.Entry{}
	for _, e := range registry.Of(registry.LeaseLevel) {
		for l, name := range levelNames {
			if e.Name == name {
				out[l] = e
			}
		}
	}
	if len(out) != len(levelNames) {
		panic("lease: the registry lacks a lease level (PROJECT, MAP, SKETCH)")
	}
	return out
}()

// The levels' order is one declared rank list of the family's order check
// (lockcore.Order): a lease and a lock of another kind taken around it are
// checked against it too.
func init() {
	ls := []Level{LevelProject, LevelMap, LevelSketch}
	slices.SortFunc(ls, func(a, b Level) int { return cmp.Compare(a.order(), b.order()) })
	names := make([]string, len(ls))
	for i, l := range ls {
		names[i] = l.String()
	}
	lockcore.Order().DeclareOrder(names...)
}

// String returns the level's registry name: "PROJECT", "MAP" or "SKETCH".
func (l Level) String() string {
	if n, ok := levelNames[l]; ok {
		return n
	}
	return "Level(" + strconv.Itoa(int(l)) + ")"
}

// order is the level's place in the global lock order (1 first), from the
// registry.
func (l Level) order() int64 { return levels[l].ID }

// Resource is one lockable thing: a project, a map or a sketch. Its String
// is the lock_id stored in the table.
type Resource struct {
	Level Level
	ID    string
}

// Project returns the resource "project:id".
func Project(id string) Resource { return Resource{LevelProject, id} }

// Map returns the resource "map:id".
func Map(id string) Resource { return Resource{LevelMap, id} }

// Sketch returns the resource "sketch:id".
func Sketch(id string) Resource { return Resource{LevelSketch, id} }

// String returns the lock_id: "project:ID", "map:ID" or "sketch:ID".
func (r Resource) String() string {
	e, ok := levels[r.Level]
	if !ok {
		return r.ID // a stored lock_id that does not parse (resourceOf)
	}
	return e.Prefix() + r.ID
}

// ParseResource turns a lock_id back into a Resource, by the registry's
// LeaseLevel patterns.
func ParseResource(lockID string) (Resource, error) {
	e, ok := registry.Match(registry.LeaseLevel, lockID)
	if !ok {
		return Resource{}, fmt.Errorf("lease: %q is not a lease resource (project:ID, map:ID or sketch:ID)", lockID)
	}
	for l, le := range levels {
		if le.Name == e.Name {
			return Resource{l, lockID[len(e.Prefix()):]}, nil
		}
	}
	return Resource{}, fmt.Errorf("lease: %q: level %s has no Level constant", lockID, e.Name)
}

// maxIDLen bounds resource ids: a lock_id travels as a NOTIFY payload
// (at most 8000 bytes) and is shown by monitors.
const maxIDLen = 1024

// validate reports a resource whose level is unknown or whose ID does not
// fit the registry's pattern (empty, or containing ':').
func (r Resource) validate() error {
	e, ok := levels[r.Level]
	if !ok {
		return fmt.Errorf("lease: unknown resource level %d", int(r.Level))
	}
	if m, ok := registry.Match(registry.LeaseLevel, r.String()); !ok || m.Name != e.Name {
		return fmt.Errorf("lease: bad resource id %q: %s ids are non-empty and have no ':'", r.ID, e.Name)
	}
	if len(r.ID) > maxIDLen {
		return fmt.Errorf("lease: resource id of %d bytes (at most %d)", len(r.ID), maxIDLen)
	}
	return nil
}

// compare orders resources as seed 004 §8.1 requires: by level (projects,
// then maps, then sketches), then by ID, byte-wise.
func compare(a, b Resource) int {
	if c := cmp.Compare(a.Level.order(), b.Level.order()); c != 0 {
		return c
	}
	return cmp.Compare(a.ID, b.ID)
}
