package waitfor

import (
	"testing"
	"time"
)

// For builds one graph per snapshot: again for the same rows read at the
// same time (a copy of the snapshot too), anew for other rows or another
// poll's.
func TestForSharesOneGraph(t *testing.T) {
	s := snapshot()
	g := For(&s)
	if For(&s) != g {
		t.Error("a second graph of the same snapshot")
	}
	if cp := s; For(&cp) != g {
		t.Error("a second graph of a copy of the snapshot")
	}
	other := snapshot() // the same content, other rows
	if For(&other) == g {
		t.Error("the graph of other rows is shared")
	}
	later := s
	later.Taken = t0.Add(time.Second)
	if For(&later) == g {
		t.Error("the graph of another poll is shared")
	}
	if len(g.Cycles()) != 1 || len(For(&s).Roots()) != len(Build(&s).Roots()) {
		t.Errorf("a shared graph differs from a built one: %d cycles", len(g.Cycles()))
	}
}
