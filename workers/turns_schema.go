package workers

import (
	"context"
	"fmt"
)

// turnsDDL holds seed 002's conversations and their committed turns; Setup
// runs it with the rest. Every statement is idempotent.
const turnsDDL = `
CREATE TABLE IF NOT EXISTS conversations (
	id      int PRIMARY KEY,
	turn_no int NOT NULL DEFAULT 0,    -- the last committed turn's number
	step    int NOT NULL DEFAULT 0,    -- the scenario step the conversation is at
	fence   bigint NOT NULL DEFAULT 0  -- the newest session-lock fence that entered a turn
);
CREATE TABLE IF NOT EXISTS conv_turns (
	id         bigserial PRIMARY KEY,
	conv_id    int NOT NULL,
	turn_no    int NOT NULL,
	message_id text NOT NULL,
	step_from  int NOT NULL,
	fence      bigint NOT NULL,
	pod        text NOT NULL,
	proc       text NOT NULL,
	at         timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX IF NOT EXISTS conv_turns_conv ON conv_turns (conv_id, at);
CREATE INDEX IF NOT EXISTS conv_turns_message ON conv_turns (message_id);
CREATE INDEX IF NOT EXISTS conv_turns_proc ON conv_turns (proc, at);
`

// EnsureConversations makes sure conversations 1..n exist. Existing ones
// are left as they are, so processes sharing the schema share them.
func EnsureConversations(ctx context.Context, db *DB, n int) error {
	if n < 1 {
		return fmt.Errorf("workers: need at least one conversation, not %d", n)
	}
	if _, err := db.Exec(ctx, "INSERT INTO conversations (id) SELECT g FROM generate_series(1, $1::int) g ON CONFLICT DO NOTHING", n); err != nil {
		return fmt.Errorf("workers: creating %d conversations: %w", n, err)
	}
	return nil
}
