// Package cli is locktop's command layer. Main runs one command; the root
// package's main.go only calls it.
//
// Each command has a file of its own, named for it (dashboard.go,
// serve.go, snapshot.go, record.go, replay.go, report.go, sim.go, key.go,
// registry.go, cluster.go), and never uses a name another command's file
// declares (layout_test.go checks). What they share has a file named for
// it:
//
//   - stack.go: the Stack, everything opened to watch one server or
//     several targets (the monitor, the Redis and lease sources, the
//     redactor, optionally the HTTP endpoints and a recording), closed in
//     one place
//   - targets.go, member.go: --target and --config, and one target's
//     monitor within a Stack (connected again at each poll while it is down)
//   - collector.go: serve's polls of several targets, each source on a
//     loop of its own, and /healthz's targets
//   - flags.go, sources.go, dsn.go: the flags, the source flags, the
//     connection options (psql's -h/-p/-U/-d and a connection string)
//   - redact.go: keeping the DSN's password off the screen and out of logs
//   - exit.go: exit codes and the errors that carry them
//   - http.go, monitoring.go: listening for --http, and the endpoints over
//     a Stack's sources
//   - recorder.go, recording.go: writing a recording, opening one to read
//   - embedded.go: the simulator the dashboard embeds, and the demo's Redis
//   - json.go, terminal.go, version.go: JSON output, terminal detection,
//     the version string
package cli
