// Package ui is locktop's Bubble Tea dashboard. It never runs SQL: lock
// snapshots, pool statistics and simulator events arrive as messages, and
// the simulator is driven through the Simulator interface.
package ui
