// Package pglocks reads every advisory lock on a PostgreSQL server, the
// sessions behind them and the heavyweight locks of other types someone
// waits for, in one statement (SQL), and works out who blocks each waiter
// from the rows (see Other.BlockedBy); a Reader does the same for a poller,
// sorting the rows again only when they changed. It is the monitor's reader, kept out
// of lockcore's exported surface: the library takes locks, pgsource shows
// them.
package pglocks
