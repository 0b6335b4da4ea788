// Package recording writes the dashboard's snapshots to a file and reads
// them back, for locktop record, replay and report.
//
// A recording is a header and a sequence of records, one per snapshot of one
// source (the PostgreSQL monitor, and any other source the dashboard polls).
// Every record is framed on its own — a marker, its length and a CRC-32C —
// and compressed on its own with zstd, so a record torn by a crash of the
// recorder, or damaged later, is skipped and the rest of the file still
// reads. Each source's records are a full keyframe every KeyframeEvery
// records and deltas in between; a delta copies runs of the previous
// snapshot's locks and adds the locks that are new or changed.
//
// Locks are stored as their JSON encoding (model.Lock's own), so fields added
// to model.Lock are recorded without a change here. model.Lock keeps
// absolute times only, so a lock that did not change encodes the same and is
// not stored again.
//
// The layout is documented in README.md ("Recording format"); Version says
// which layout a file has, and a file of a newer layout is refused with a
// *VersionError.
package recording
