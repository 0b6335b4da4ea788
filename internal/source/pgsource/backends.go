package pgsource

import (
	"github.com/locktop/locktop/internal/source/pglocks"
	"github.com/locktop/locktop/model"
)

// backends turns a poll's sessions (pglocks.Backend, one per backend, shared
// by its rows) into the model's, once each: every model row of a backend
// points to one model.Backend, whose application has the owner id taken
// out (the id is the row's Owner, and the APPLICATION column stays
// readable). 10,000 locks of 50 sessions carry 50 values, not 10,000 copies
// of eight fields (issue 26).
//
// A Monitor keeps the last poll's values (prev): pglocks.Reader gives a
// session the server shows unchanged the same *pglocks.Backend, so its
// model value is reused too, and an unchanged server's poll converts none.
type backends struct {
	// The last backend converted: a backend's rows are mostly neighbours.
	last  *pglocks.Backend
	lastM *model.Backend
	owner string
	byB   map[*pglocks.Backend]converted
	prev  map[*pglocks.Backend]converted // the last poll's byB, or nil
}

type converted struct {
	b     *model.Backend
	owner string
}

// of returns the model's value of b and the owner id its application
// carries.
func (c *backends) of(b *pglocks.Backend) (*model.Backend, string) {
	if b == c.last && c.lastM != nil {
		return c.lastM, c.owner
	}
	cv, ok := c.byB[b]
	if !ok {
		if cv, ok = c.prev[b]; !ok {
			app, owner, _ := model.OwnerFromApp(b.Application)
			cv = converted{&model.Backend{User: b.User, ApplicationName: app, ClientAddr: b.ClientAddr, State: b.State,
				Query: b.Query, QueryStart: b.QueryStart, StateChange: b.StateChange, XactStart: b.XactStart}, owner}
		}
		if c.byB == nil {
			c.byB = map[*pglocks.Backend]converted{}
		}
		c.byB[b] = cv
	}
	c.last, c.lastM, c.owner = b, cv.b, cv.owner
	return cv.b, cv.owner
}
