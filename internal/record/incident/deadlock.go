// Deadlocks: the cycles of waits the recording shows in two consecutive
// snapshots, found by the dashboard's own rule (model/waitfor).

package incident

import (
	"time"

	"github.com/locktop/locktop/model"
	"github.com/locktop/locktop/model/waitfor"
)

// Deadlock is a cycle of waits seen in two consecutive snapshots or more.
type Deadlock struct {
	// Kinds of its waits, joined by "+" ("advisory+redis"): the label of
	// locktop_deadlocks_total.
	Kinds string `json:"kinds"`
	// Parties are the owners and backends in the cycle.
	Parties []string `json:"parties"`
	// Waits are its edges: who waits for whom, on which key.
	Waits []DeadlockWait `json:"waits"`
	// ServerResolves: every wait is a PostgreSQL lock of one server, whose
	// own detector breaks the cycle after deadlock_timeout.
	ServerResolves bool `json:"server_resolves"`
	// Formed is when its last wait began; Found the snapshot that confirmed
	// it (the second that showed it); Last the last that showed it.
	Formed time.Time `json:"formed"`
	Found  time.Time `json:"found"`
	Last   time.Time `json:"last"`
}

// DeadlockWait is one wait of a deadlock.
type DeadlockWait struct {
	Waiter string    `json:"waiter"`
	Holder string    `json:"holder"`
	Kind   string    `json:"kind"`
	Key    string    `json:"key"`
	Mode   string    `json:"mode"`
	Since  time.Time `json:"since"`
}

// deadlocks follows the cycles from snapshot to snapshot.
type deadlocks struct {
	det  waitfor.Detector
	open map[string]int // a deadlock's ID → its index in found
	all  []Deadlock
}

// observe takes the next snapshot that answered, taken at t.
func (d *deadlocks) observe(t time.Time, s *model.Snapshot) {
	active, fresh := d.det.Observe(waitfor.Build(s))
	if d.open == nil {
		d.open = map[string]int{}
	}
	for i := range fresh {
		c := &fresh[i]
		x := Deadlock{Kinds: c.KindsLabel(), ServerResolves: c.ServerResolves, Formed: c.Formed(), Found: t}
		for _, p := range c.Sessions {
			x.Parties = append(x.Parties, c.Party(p))
		}
		for _, e := range c.Edges {
			x.Waits = append(x.Waits, DeadlockWait{Waiter: c.Party(e.From), Holder: c.Party(e.To), Kind: string(e.Wait.Kind),
				Key: e.Wait.KeyLabel(), Mode: e.Wait.Mode, Since: e.Wait.WaitStart})
		}
		d.open[c.ID()] = len(d.all)
		d.all = append(d.all, x)
	}
	for i := range active {
		if j, ok := d.open[active[i].ID()]; ok {
			d.all[j].Last = t
		}
	}
}
