package waitfor

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/locktop/locktop/model"
)

// Edge is one wait inside a cycle: From waits for To. Wait is From's
// waiting row that names To; Held is To's granted row of the same key, when
// the snapshot has it (a Redis or lease holder, an advisory holder), else
// the zero Lock. They are copies, so a Cycle outlives its snapshot.
type Edge struct {
	From, To Session
	Wait     model.Lock
	Held     model.Lock
}

// Cycle is a set of sessions that wait for each other, every one of them
// (a strongly connected part of the graph): none can go on until one gives
// up. Across kinds no server sees it; inside one PostgreSQL server, the
// server's own detector cancels one of them after deadlock_timeout.
type Cycle struct {
	// Sessions in the cycle, in a fixed order (owners by name, then
	// backends by source and pid).
	Sessions []Session
	// Edges are the waits between them, From in the order of Sessions.
	Edges []Edge
	// Kinds of the waits, in the order of model.Kinds, each once.
	Kinds []model.Kind
	// ServerResolves says every wait is a PostgreSQL lock of one server:
	// that server's deadlock detector will break the cycle by itself.
	ServerResolves bool
}

// ID identifies the cycle across polls: its sessions and the keys they
// wait on. The same parties waiting on other keys are another cycle.
func (c *Cycle) ID() string {
	var b strings.Builder
	for _, e := range c.Edges {
		b.WriteString(e.From.String())
		b.WriteString(">")
		b.WriteString(e.To.String())
		b.WriteString("@")
		b.WriteString(e.Wait.KeyLabel())
		b.WriteString(";")
	}
	return b.String()
}

// KindsLabel names the kinds involved, joined by "+": "advisory+redis".
// There are few kinds, so it is a bounded metric label.
func (c *Cycle) KindsLabel() string {
	s := make([]string, len(c.Kinds))
	for i, k := range c.Kinds {
		s[i] = string(k)
	}
	return strings.Join(s, "+")
}

// ServersLabel names the targets of the waits (Lock.Server), sorted, each
// once, joined by "+": "a", or "a+b" for a cycle whose owners wait on two
// targets; "" of the one unnamed target. Targets are few, so it is a
// bounded metric label.
func (c *Cycle) ServersLabel() string {
	var s []string
	for _, e := range c.Edges {
		if !slices.Contains(s, e.Wait.Server) {
			s = append(s, e.Wait.Server)
		}
	}
	slices.Sort(s)
	return strings.Join(s, "+")
}

// Formed is when the cycle closed: the latest start of its waits.
func (c *Cycle) Formed() time.Time {
	var t time.Time
	for _, e := range c.Edges {
		if e.Wait.WaitStart.After(t) {
			t = e.Wait.WaitStart
		}
	}
	return t
}

// String names a session for logs and keys: "owner pod-3", "pid 4711"
// (source 0), "pid 4711@2".
func (x Session) String() string {
	if x.Owner != "" {
		return "owner " + x.Owner
	}
	s := "pid " + strconv.Itoa(int(x.PID))
	if x.Source != 0 {
		s += "@" + strconv.Itoa(x.Source)
	}
	return s
}

// compareSessions orders owners by name before backends by source and pid.
func compareSessions(a, b Session) int {
	if (a.Owner == "") != (b.Owner == "") {
		if a.Owner != "" {
			return -1
		}
		return 1
	}
	return cmp.Or(cmp.Compare(a.Owner, b.Owner), cmp.Compare(a.Source, b.Source), cmp.Compare(a.PID, b.PID))
}

// Cycles are the graph's cycles of waits, each strongly connected part of
// two sessions or more (a session's wait for itself is never an edge),
// ordered by their first session. Found once, on first use.
func (g *Graph) Cycles() []Cycle {
	g.once.Do(func() {
		for _, scc := range g.components() {
			if c := g.cycleOf(scc); c.plausible() {
				g.cycles = append(g.cycles, c)
			}
		}
		slices.SortFunc(g.cycles, func(a, b Cycle) int { return compareSessions(a.Sessions[0], b.Sessions[0]) })
	})
	return g.cycles
}

// components are the strongly connected parts of two sessions or more
// (Tarjan's algorithm, iterative so a long chain cannot exhaust the stack).
func (g *Graph) components() [][]int32 {
	type frame struct {
		x int32
		i int // next blocker to visit
	}
	n := len(g.order)
	index, low := make([]int32, n), make([]int32, n)
	for i := range index {
		index[i] = -1
	}
	on := make([]bool, n)
	var stack []int32
	var out [][]int32
	next := int32(0)
	visit := func(x int32) {
		index[x], low[x] = next, next
		next++
		stack = append(stack, x)
		on[x] = true
	}
	var calls []frame
	for root := range int32(n) {
		if index[root] >= 0 || len(g.blockersOf(root)) == 0 {
			continue
		}
		visit(root)
		calls = append(calls[:0], frame{x: root})
		for len(calls) > 0 {
			f := &calls[len(calls)-1]
			if bs := g.blockersOf(f.x); f.i < len(bs) {
				y := bs[f.i]
				f.i++
				if index[y] < 0 {
					visit(y)
					calls = append(calls, frame{x: y})
				} else if on[y] {
					low[f.x] = min(low[f.x], index[y])
				}
				continue
			}
			x := f.x
			calls = calls[:len(calls)-1]
			if len(calls) > 0 {
				p := calls[len(calls)-1].x
				low[p] = min(low[p], low[x])
			}
			if low[x] != index[x] {
				continue
			}
			i := len(stack) - 1
			for stack[i] != x {
				i--
			}
			for _, y := range stack[i:] {
				on[y] = false
			}
			if len(stack)-i > 1 {
				out = append(out, slices.Clone(stack[i:]))
			}
			stack = stack[:i]
		}
	}
	return out
}

// cycleOf describes one strongly connected part: its waits, their kinds,
// and whether one server will break it.
func (g *Graph) cycleOf(ids []int32) Cycle {
	part := g.sessions(ids)
	slices.SortFunc(part, compareSessions)
	in := map[int32]bool{}
	for _, x := range ids {
		in[x] = true
	}
	c := Cycle{Sessions: part, ServerResolves: true}
	src := -1
	for _, xs := range part {
		x := g.lookup(xs)
		for _, y := range g.blockersOf(x) {
			if !in[y] {
				continue
			}
			ys := g.order[y]
			e := Edge{From: xs, To: ys}
			for _, i := range g.waitsOf(x) {
				if g.names(&g.snap.Locks[i], y) {
					e.Wait = g.snap.Locks[i]
					break
				}
			}
			key := e.Wait.KeyID()
			for _, i := range g.holdsOf(y) {
				if h := &g.snap.Locks[i]; h.KeyID() == key && h.Source == e.Wait.Source {
					e.Held = *h
					break
				}
			}
			c.Edges = append(c.Edges, e)
			if !slices.Contains(c.Kinds, e.Wait.Kind) {
				c.Kinds = append(c.Kinds, e.Wait.Kind)
			}
			if !e.Wait.Kind.PG() || (src >= 0 && e.Wait.Source != src) {
				c.ServerResolves = false
			}
			src = e.Wait.Source
		}
	}
	slices.SortFunc(c.Kinds, func(a, b model.Kind) int { return cmp.Compare(kindRank(a), kindRank(b)) })
	return c
}

// names reports whether waiting row l names session y among its holders.
func (g *Graph) names(l *model.Lock, y int32) bool {
	for _, p := range l.BlockedBy {
		if n, ok := g.byPID[pidKey(l.Source, p)]; ok && n == y {
			return true
		}
	}
	for _, o := range l.BlockedByOwners {
		if n, ok := g.byOwner[o]; ok && n == y {
			return true
		}
	}
	return false
}

// kindRank is k's place in model.Kinds (unknown kinds last).
func kindRank(k model.Kind) int {
	if i := slices.Index(model.Kinds, k); i >= 0 {
		return i
	}
	return len(model.Kinds)
}

// Party names a session for people: its owner or pid, with the pids of an
// owner's PostgreSQL backends in the snapshot's rows of the cycle ("x (pid
// 10)").
func (c *Cycle) Party(x Session) string {
	s := x.String()
	if x.Owner == "" {
		return s
	}
	var pids []int32
	for _, e := range c.Edges {
		for _, l := range []*model.Lock{&e.Wait, &e.Held} {
			if l.Owner == x.Owner && l.PID != 0 && !slices.Contains(pids, l.PID) {
				pids = append(pids, l.PID)
			}
		}
	}
	for i, p := range pids {
		if i == 0 {
			s += " (pid "
		} else {
			s += ", "
		}
		s += strconv.Itoa(int(p))
		if i == len(pids)-1 {
			s += ")"
		}
	}
	return s
}

// Text says what one wait is, for people: "owner x (pid 10) waits for
// owner y on redis K (exclusive) since 15:04:05".
func (c *Cycle) Text(e Edge) string {
	s := c.Party(e.From) + " waits for " + c.Party(e.To) + " on " + string(e.Wait.Kind) + " " + e.Wait.KeyLabel()
	if e.Wait.Mode != "" {
		s += " (" + e.Wait.Mode + ")"
	}
	if !e.Wait.WaitStart.IsZero() {
		s += " since " + e.Wait.WaitStart.Format("15:04:05.000")
	}
	return s
}

// Summary is the cycle in one line, for an event or a log: its kinds, then
// each wait; and who will break it when a server will.
func (c *Cycle) Summary() string {
	parts := make([]string, len(c.Edges))
	for i, e := range c.Edges {
		parts[i] = c.Text(e)
	}
	s := c.KindsLabel() + ": " + strings.Join(parts, "; ")
	if c.ServerResolves {
		s += " (PostgreSQL will cancel one of them after deadlock_timeout)"
	}
	return s
}

// plausible reports whether every party of the cycle could be one task
// that holds what the others wait for and waits itself. A party is an owner
// id, often a process running many tasks; a task that waits cannot be
// granted a lock meanwhile, so where a party's hold was granted after its
// wait began (both on one source's clock, the grant recorded exactly: a
// Redis or lease hold), that hold belongs to another of its tasks, and
// unless another of its holds fits, the cycle is no deadlock: two pods each
// holding a conversation the other pod waits for, from other goroutines.
func (c *Cycle) plausible() bool {
	ins, outs := map[Session][]int{}, map[Session][]int{}
	for i, e := range c.Edges {
		ins[e.To] = append(ins[e.To], i)
		outs[e.From] = append(outs[e.From], i)
	}
	for _, x := range c.Sessions {
		ok := false
		for _, i := range ins[x] {
			for _, o := range outs[x] {
				if !grantedAfter(&c.Edges[i].Held, &c.Edges[o].Wait) {
					ok = true
				}
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// grantedAfter reports whether hold h is known to have been granted after
// wait w began: both on one source, h's grant recorded exactly.
func grantedAfter(h, w *model.Lock) bool {
	exact := h.Granted && (h.Kind == model.KindRedis || h.Kind == model.KindLease)
	return exact && h.Source == w.Source && !h.HeldSince.IsZero() && !w.WaitStart.IsZero() && h.HeldSince.After(w.WaitStart)
}
