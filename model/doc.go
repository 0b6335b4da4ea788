// Package model holds the plain data that flows between locktop's packages:
// locks read from the server, pool statistics, simulator events and counters.
//
// It imports only the standard library and lockcore/registry (itself
// standard-library only, for the one key formatter), so that every other
// package, the UI above all, can depend on it without pulling in a database
// driver.
package model
