package waitfor

// Detector turns the cycles of successive polls into deadlocks: a cycle
// seen in two consecutive polls is a deadlock (pg_shardman's rule: a cycle
// seen once may be a phantom, stitched together from sources read a moment
// apart while one wait was already over). Feed it one graph per poll of
// every source, merged. The zero value is ready; it is not safe for
// concurrent use.
type Detector struct {
	seen      map[string]bool // the cycles of the previous poll
	confirmed map[string]bool // the deadlocks of the previous poll
	active    []Cycle
}

// Observe takes the graph of the next poll. It returns the deadlocks now
// (cycles seen in this poll and the previous one) and, among them, the new
// ones: confirmed by this poll, not by the previous (count and announce
// these once; one that ends and comes back is new again).
func (d *Detector) Observe(g *Graph) (active, fresh []Cycle) {
	seen, confirmed := map[string]bool{}, map[string]bool{}
	for _, c := range g.Cycles() {
		id := c.ID()
		seen[id] = true
		if !d.seen[id] {
			continue
		}
		confirmed[id] = true
		active = append(active, c)
		if !d.confirmed[id] {
			fresh = append(fresh, c)
		}
	}
	d.seen, d.confirmed, d.active = seen, confirmed, active
	return active, fresh
}

// Active are the deadlocks of the last poll observed.
func (d *Detector) Active() []Cycle { return d.active }
