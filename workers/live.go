package workers

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// LiveAppPrefix begins the application_name of a process's live session
// (see Env.Join); the rest is the process's Proc token.
const LiveAppPrefix = "locktop.live "

// maxAppName is PostgreSQL's limit on application_name (NAMEDATALEN - 1):
// a longer name is cut, and would no longer match its Proc.
const maxAppName = 63

// Join opens this process's live session: a connection of its own to the
// work pool's database, named LiveAppPrefix + Proc, kept open until Leave.
// While it is connected, other processes count this process's critical
// sections in their overlap check; once it is gone (Leave, a crash, kill
// -9: the server ends the session when the client's socket closes) they
// ignore them, so the rows a killed process leaves behind are never taken
// for sections still inside. A process that never joins is seen by no
// other process; its own sections always count for itself.
func (e *Env) Join(ctx context.Context) error {
	name := LiveAppPrefix + e.Proc
	if len(name) > maxAppName {
		return fmt.Errorf("workers: process token %q is too long for an application_name", e.Proc)
	}
	cfg := e.DB.Pool().Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = name
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("workers: opening the live session: %w", err)
	}
	e.liveMu.Lock()
	old := e.live
	e.live = conn
	e.liveMu.Unlock()
	if old != nil {
		_ = old.Close(context.Background())
	}
	return nil
}

// Leave closes the live session, if one is open. From then on other
// processes ignore this process's sections.
func (e *Env) Leave() {
	e.liveMu.Lock()
	conn := e.live
	e.live = nil
	e.liveMu.Unlock()
	if conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		_ = conn.Close(ctx)
	}
}
