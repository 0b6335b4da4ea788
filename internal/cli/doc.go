// Package cli is locktop's command layer: the command line of every
// command (a file each: dashboard.go, serve.go, snapshot.go, …), their
// flags, connection options and exit codes. Main runs one command; the
// root package's main.go only calls it.
package cli
