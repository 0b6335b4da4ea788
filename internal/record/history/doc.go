// Package history keeps the recent past of a dashboard or a serve in the
// recording format, so that it can be rewound, asked for a moment (?at=)
// or reviewed (report) after the fact, without anyone having started
// locktop record before the incident.
//
// A History is a sequence of segments, each a complete recording (a
// header, then every source's keyframe, then deltas), of which only the
// newest is written to. A segment is closed and a new one begun once it
// holds an eighth of the size bound or has covered an eighth of the age
// bound; whole segments are dropped, oldest first, while the segments
// together exceed the size bound or a segment's newest record is older
// than the age bound. So the history holds at least the last Keep (when
// it fits in MaxBytes) and never much more than MaxBytes.
//
// Segments live in memory, or, with a directory, in files named
// history-<UTC time>-<pid>.ltr there, which outlive the process: a
// history directory is read back as one recording (Open), by locktop
// replay and report, and a process that starts on a directory keeps the
// files it finds and removes them by the same bounds. A file cut short by
// a kill -9 loses only its torn last record.
package history
