package lease

import (
	"context"
	"errors"
	"testing"
)

// WithAll runs its body under every request, in a context that carries
// them all (LockOf) and is cancelled when any of them is lost, older ones
// too; the loss is joined to the body's error and everything is released.
func TestWithAllLoss(t *testing.T) {
	m := sqliteEnv(t).open(Options{Owner: "A"})
	p, mp := Project("p"), Map("m")
	body := errors.New("body failed")
	err := m.WithAll(ctxT(t), []Request{{mp, Write}, {p, Read}}, func(ctx context.Context) error {
		lp, lm := LockOf(ctx, p), LockOf(ctx, mp)
		if lp == nil || lm == nil || lm.Mode() != Write {
			t.Fatalf("LockOf in the body: %v %v", lp, lm)
		}
		if ctx.Err() != nil {
			t.Fatalf("body's context ended at start: %v", context.Cause(ctx))
		}
		lp.lose("test: the older lock is lost")
		<-ctx.Done()
		if !errors.Is(context.Cause(ctx), ErrLost) {
			t.Errorf("body's cause %v, want ErrLost", context.Cause(ctx))
		}
		return body
	})
	if !errors.Is(err, body) || !errors.Is(err, ErrLost) {
		t.Errorf("WithAll: %v; want the body's error and ErrLost", err)
	}
	if tryFails(t, m, mp, Write) {
		t.Error("the map is still held after WithAll")
	}
}
