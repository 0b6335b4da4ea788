package ui

import (
	"strings"
	"testing"
	"time"

	"github.com/locktop/locktop/model"
)

// A holder inside a transaction shows its transaction's age beside the
// held bound, in the table's time cell, the details and the chain: the
// bound alone can read far less than what the server proves.
func TestHolderShowsTransactionAge(t *testing.T) {
	now := time.Date(2026, 11, 26, 4, 0, 0, 0, time.UTC)
	h := model.Lock{Kind: model.KindRelation, PID: 11, Relation: "public.orders", Mode: "AccessShareLock", Granted: true,
		Backend: &model.Backend{State: "active", XactStart: now.Add(-76 * time.Second)}, HeldSince: now.Add(-12 * time.Second)}
	if got, _ := lockTime(&h, now); got != "≥12s in tx 1m16s" {
		t.Errorf("time cell %q, want %q", got, "≥12s in tx 1m16s")
	}
	if got := heldState(&h, now); !strings.Contains(got, "in a transaction begun 1m16s ago") {
		t.Errorf("details %q: no transaction age", got)
	}
	// Outside a transaction, the bound alone.
	h.OwnBackend().XactStart = time.Time{}
	if got, _ := lockTime(&h, now); got != "≥12s" {
		t.Errorf("time cell %q, want ≥12s", got)
	}
}
