package lockcore

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// ErrLockOrder means an acquire would invert the lock order (Order): a
// class it holds must come after the one asked for. It matches
// ErrReentrant. Only a strict Order returns it; otherwise inversions are
// reported and the acquire goes on.
var ErrLockOrder = Kin("lock order inverted (a held lock's class must come after this one's)", ErrReentrant)

// Inversion is an acquire that closed a cycle in the lock-order graph: it
// takes a lock of class To while holding one of class From, where the
// graph already says To comes before From (observed, or declared with
// DeclareOrder). Two goroutines doing both orders at once can deadlock,
// whatever kinds the locks are of.
type Inversion struct {
	From, To string // the held class and the class acquired
	// FromStore and ToStore are the held lock's store and the acquired
	// one's (Entry.Store): the same class on two stores is two classes.
	FromStore, ToStore string
	Site               string   // where To is acquired now, holding From
	Path               []string // the order the graph had: To ... From, each "CLASS@store" ("CLASS" for no store)
	PathSite           string   // where the graph's first step out of To was first seen ("declared" if declared)
	HeldSite           string   // where the held lock was acquired, if recorded (Entry.Site), else ""
	FromKind           string
	ToKind             string
	HeldName           string // the held lock, within its kind
	Name               string // the lock acquired
	At                 time.Time
}

func (v Inversion) String() string {
	return fmt.Sprintf("lock order inversion: %s (%s) acquired at %s while holding %s (%s); the order so far is %v, first seen at %s",
		node{v.To, v.ToStore}, v.Name, v.Site, node{v.From, v.FromStore}, v.HeldName, v.Path, v.PathSite)
}

// Edge is one edge of the lock-order graph: From (on FromStore) was held
// when To (on ToStore) was acquired. A declared edge has no stores: it
// orders the two classes on every store, each with itself.
type Edge struct {
	From, To           string
	FromStore, ToStore string
	Site               string    // where it was first seen ("declared" for DeclareOrder)
	First              time.Time // when
	Declared           bool
}

// node is one vertex of the graph: a class of locks on one store. The same
// class on two stores is two vertices, since their locks are different
// locks: AGENT 1 in database A then AGENT 1 in database B is an edge, and
// X then Y in A does not make Y then X in B an inversion.
type node struct{ class, store string }

func (n node) String() string {
	if n.store == "" {
		return n.class
	}
	return n.class + "@" + n.store
}

func (e *Edge) nodes() [2]node { return [2]node{{e.From, e.FromStore}, {e.To, e.ToStore}} }

// OrderGraph is the family's lock-order checker: one per process (Order).
// Acquiring a lock while holding others records, for each held class A,
// the edge A -> the new lock's class, where a class is the registry name of
// the lock (AGENT, SESSION, MAP, ...) on the lock's store (Entry.Store):
// the same class on two stores is two classes. The first acquire whose
// edge closes a cycle is reported at once, before any deadlock happens: to the
// OnInversion functions (an event), to the log with both acquisition
// sites, and in Inversions (locktop_lock_order_inversions_total). A strict
// graph (SetStrict, for tests) also refuses that acquire with ErrLockOrder.
// Nesting locks of the same class on the same store (two agents) is not
// checked: a kind that orders instances does it itself (lease, by id).
type OrderGraph struct {
	mu      sync.RWMutex
	edges   map[[2]node]*Edge
	out     map[node][]node  // adjacency; declared edges are between nodes of no store
	seen    map[[2]node]bool // inversions reported once per pair
	hooks   map[int]func(Inversion)
	hookID  int
	log     *slog.Logger
	strict  atomic.Bool
	off     atomic.Bool
	count   atomic.Int64
	history []Inversion
}

var order = newOrderGraph()

// inversions counts the inversions of every graph of the process.
var inversions atomic.Int64

// Order returns the process's lock-order graph: the one acquires use unless
// their context carries another (WithOrder).
func Order() *OrderGraph { return order }

// InversionsTotal returns how many inversions every graph of the process
// has reported, cumulative: the counter
// locktop_lock_order_inversions_total.
func InversionsTotal() int64 { return inversions.Load() }

func newOrderGraph() *OrderGraph {
	return &OrderGraph{edges: map[[2]node]*Edge{}, out: map[node][]node{}, seen: map[[2]node]bool{}, hooks: map[int]func(Inversion){}}
}

// NewOrderGraph returns a graph of its own, with the orders declared on the
// process's (DeclareOrder), for code that wants its inversions apart (the
// simulator, per run): give it to acquires with WithOrder.
func NewOrderGraph() *OrderGraph {
	g := newOrderGraph()
	for _, e := range order.Edges() {
		if e.Declared {
			g.add(&Edge{From: e.From, To: e.To, Site: "declared", First: e.First, Declared: true})
		}
	}
	return g
}

type orderKey struct{}

// WithOrder returns a context whose acquires (of every kind) record their
// order in g instead of the process's graph.
func WithOrder(ctx context.Context, g *OrderGraph) context.Context {
	return context.WithValue(ctx, orderKey{}, g)
}

// orderOf is the graph ctx's acquires use.
func orderOf(ctx context.Context) *OrderGraph {
	if g, ok := ctx.Value(orderKey{}).(*OrderGraph); ok {
		return g
	}
	return order
}

// DeclareOrder declares that classes are taken in the order given (each
// before the next) on any one store, like Go's runtime lock ranks: taking
// them the other way round on one store is an inversion from its first
// occurrence, before the right order was ever observed. lockcore/lease
// declares PROJECT, MAP, SKETCH.
func (g *OrderGraph) DeclareOrder(classes ...string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i := 1; i < len(classes); i++ {
		k := [2]node{{class: classes[i-1]}, {class: classes[i]}}
		if e, ok := g.edges[k]; ok {
			e.Declared = true
			continue
		}
		g.add(&Edge{From: k[0].class, To: k[1].class, Site: "declared", First: time.Now(), Declared: true})
	}
}

// SetStrict makes an acquire that inverts the order fail with ErrLockOrder
// (for tests); by default it is reported and goes on.
func (g *OrderGraph) SetStrict(on bool) { g.strict.Store(on) }

// SetEnabled turns the check on (the default) or off.
func (g *OrderGraph) SetEnabled(on bool) { g.off.Store(!on) }

// SetLogger sets where inversions are logged (default slog.Default()).
func (g *OrderGraph) SetLogger(l *slog.Logger) {
	g.mu.Lock()
	g.log = l
	g.mu.Unlock()
}

// OnInversion adds a function called with every inversion, once per pair of
// classes, on the acquiring goroutine. It returns a function that removes it.
func (g *OrderGraph) OnInversion(fn func(Inversion)) (remove func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.hookID++
	id := g.hookID
	g.hooks[id] = fn
	return func() {
		g.mu.Lock()
		delete(g.hooks, id)
		g.mu.Unlock()
	}
}

// Inversions returns how many inversions have been reported, cumulative
// (the counter locktop_lock_order_inversions_total).
func (g *OrderGraph) Inversions() int64 { return g.count.Load() }

// History returns the inversions reported so far, oldest first (at most
// the first 100).
func (g *OrderGraph) History() []Inversion {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return slices.Clone(g.history)
}

// Edges returns the graph's edges, sorted.
func (g *OrderGraph) Edges() []Edge {
	g.mu.RLock()
	out := make([]Edge, 0, len(g.edges))
	for _, e := range g.edges {
		out = append(out, *e)
	}
	g.mu.RUnlock()
	slices.SortFunc(out, func(a, b Edge) int {
		return cmp.Or(cmp.Compare(a.From, b.From), cmp.Compare(a.FromStore, b.FromStore),
			cmp.Compare(a.To, b.To), cmp.Compare(a.ToStore, b.ToStore))
	})
	return out
}

// Reset forgets every observed edge, inversion and count, keeping the
// declared edges (for tests and simulator runs).
func (g *OrderGraph) Reset() {
	g.mu.Lock()
	defer g.mu.Unlock()
	old := g.edges
	g.edges, g.out, g.seen, g.history = map[[2]node]*Edge{}, map[node][]node{}, map[[2]node]bool{}, nil
	for _, e := range old {
		if e.Declared {
			g.add(&Edge{From: e.From, To: e.To, Site: "declared", First: e.First, Declared: true})
		}
	}
	g.count.Store(0)
}

// Handler serves the graph as JSON, {"edges": [...], "inversions": [...]},
// for an application to mount (e.g. at /debug/lockorder), so a monitor can
// merge the graphs of several processes.
func (g *OrderGraph) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(struct {
			Edges      []Edge      `json:"edges"`
			Inversions []Inversion `json:"inversions"`
		}{g.Edges(), g.History()})
	})
}

// add puts e in the graph; g.mu is held.
func (g *OrderGraph) add(e *Edge) {
	k := e.nodes()
	g.edges[k] = e
	g.out[k[0]] = append(g.out[k[0]], k[1])
}

// edge returns the edge a -> b: observed, or declared for a's and b's
// classes when they are on one store; g.mu is held.
func (g *OrderGraph) edge(a, b node) *Edge {
	if e, ok := g.edges[[2]node{a, b}]; ok {
		return e
	}
	if a.store == b.store {
		return g.edges[[2]node{{class: a.class}, {class: b.class}}]
	}
	return nil
}

// skip says the order check passes over held when e is acquired: a held
// lock of no class, or of e's class on e's store.
func skip(held, e *Entry) bool {
	return held.Class == "" || (held.Class == e.Class && held.Store == e.Store)
}

// check records the edges from the classes held in h to e's class and reports an
// inversion. The usual case, every edge known already, takes the read lock
// once and allocates nothing.
func (g *OrderGraph) check(h *Entry, e *Entry) error {
	if g.off.Load() {
		return nil
	}
	known := true
	g.mu.RLock()
	to := node{e.Class, e.Store}
	for x := h; x != nil; x = x.next {
		if skip(x, e) {
			continue
		}
		if _, ok := g.edges[[2]node{{x.Class, x.Store}, to}]; !ok {
			known = false
			break
		}
	}
	g.mu.RUnlock()
	if known {
		return nil
	}
	return g.learn(h, e)
}

// learn adds the new edges from the classes held in h to e's class, and
// reports the first that closes a cycle. It records e's site: skipping
// runtime.Callers, learn, check and Check, the frames from Check's caller.
func (g *OrderGraph) learn(h *Entry, e *Entry) error {
	runtime.Callers(4, e.site[:])
	var found []Inversion
	g.mu.Lock()
	to := node{e.Class, e.Store}
	for x := h; x != nil; x = x.next {
		if skip(x, e) || (x.Hold != nil && x.Hold.Err() != nil) {
			continue
		}
		from := node{x.Class, x.Store}
		k := [2]node{from, to}
		if _, ok := g.edges[k]; ok {
			continue
		}
		// Does the graph already lead from e's class to the held one?
		path := g.path(to, from)
		if path != nil && !g.seen[k] {
			g.seen[k] = true
			steps := make([]string, len(path))
			for i, n := range path {
				steps[i] = n.String()
			}
			found = append(found, Inversion{
				From: x.Class, To: e.Class, FromStore: x.Store, ToStore: e.Store, HeldSite: x.Site(), Site: siteOf(e.site[:]),
				Path: steps, PathSite: g.edge(path[0], path[1]).Site, FromKind: x.Kind, ToKind: e.Kind,
				HeldName: x.Name, Name: e.Name, At: time.Now(),
			})
		}
		g.add(&Edge{From: x.Class, To: e.Class, FromStore: x.Store, ToStore: e.Store, Site: siteOf(e.site[:]), First: time.Now()})
	}
	hooks := make([]func(Inversion), 0, len(g.hooks))
	for _, fn := range g.hooks {
		hooks = append(hooks, fn)
	}
	log := g.log
	for _, v := range found {
		if len(g.history) < 100 {
			g.history = append(g.history, v)
		}
	}
	g.mu.Unlock()
	if len(found) == 0 {
		return nil
	}
	if log == nil {
		log = slog.Default()
	}
	for _, v := range found {
		g.count.Add(1)
		inversions.Add(1)
		log.Error("lock order inversion", "held", v.From, "held_store", v.FromStore, "held_lock", v.HeldName, "held_at", v.HeldSite,
			"acquired", v.To, "store", v.ToStore, "lock", v.Name, "acquired_at", v.Site, "order", v.Path, "order_seen_at", v.PathSite)
		for _, fn := range hooks {
			callHook(log, fn, v)
		}
	}
	if g.strict.Load() {
		return fmt.Errorf("%w: %s", ErrLockOrder, found[0])
	}
	return nil
}

// path returns a path from a to b in the graph (a first), or nil. A node
// on a store follows its observed edges and the declared ones of its
// class, to the same store; g.mu is held.
func (g *OrderGraph) path(a, b node) []node {
	prev := map[node]node{}
	queue := []node{a}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		next := g.out[n]
		if n.store != "" {
			c := node{class: n.class}
			for _, d := range g.out[c] {
				if g.edges[[2]node{c, d}].Declared {
					next = append(slices.Clip(next), node{d.class, n.store})
				}
			}
		}
		for _, m := range next {
			if _, ok := prev[m]; ok || m == a {
				continue
			}
			prev[m] = n
			if m == b {
				p := []node{b}
				for c := b; c != a; {
					c = prev[c]
					p = append(p, c)
				}
				slices.Reverse(p)
				return p
			}
			queue = append(queue, m)
		}
	}
	return nil
}

func callHook(log *slog.Logger, fn func(Inversion), v Inversion) {
	defer func() {
		if r := recover(); r != nil {
			buf := make([]byte, 2048)
			buf = buf[:runtime.Stack(buf, false)]
			log.Error("lock order hook panicked", "panic", fmt.Sprint(r), "stack", string(buf))
		}
	}()
	fn(v)
}
