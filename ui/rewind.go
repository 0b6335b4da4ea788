package ui

import (
	tea "charm.land/bubbletea/v2"
	"github.com/locktop/locktop/internal/record/incident"

	"github.com/locktop/locktop/model"
)

// rewound is the live dashboard while the rewind key shows its history:
// what the live screen had, kept for the return, and the newest answer of
// each source since. Polling goes on underneath; its answers are kept
// here, not shown, and the event log's new lines wait in Model.held.
type rewound struct {
	keys    KeyMap
	snaps   []model.Snapshot
	hasSnap []bool
	merged  model.Snapshot
	events  eventLog
	eps     *incident.Episodes
	newer   map[int]model.Snapshot // answers that came in meanwhile
}

// rewind takes the live dashboard onto the timeline of the history it
// keeps, at its newest moment: step, seek and play as in a replay.
func (m *Model) rewind() tea.Cmd {
	rep, err := m.opts.History()
	if err != nil {
		m.setStatus("rewind: "+Sanitize(err.Error()), true)
		return nil
	}
	if rep.Len() == 0 || len(rep.Sources()) != len(m.snaps) {
		m.setStatus("rewind: the history holds nothing yet", true)
		return nil
	}
	m.rewound = &rewound{
		keys: m.keys, snaps: m.snaps, hasSnap: m.hasSnap, merged: m.merged, events: m.events, eps: m.episodes,
		newer: map[int]model.Snapshot{},
	}
	m.snaps, m.hasSnap = make([]model.Snapshot, len(m.snaps)), make([]bool, len(m.snaps))
	m.replay = &timeline{st: m.st, keys: &m.keys, rep: rep, speed: 1}
	m.header.replay, m.header.rewound = m.replay, true
	m.header.recorded = make([]*feed, len(m.poll.feeds))
	for i, f := range m.poll.feeds {
		m.header.recorded[i] = &feed{name: f.name}
	}
	m.keys.setReplay(true)
	m.keys.Rewind.SetEnabled(false)
	m.keys.Live.SetEnabled(true)
	m.bind = m.bindings()
	m.log.Info("rewind", "first", rep.Time(0), "last", rep.Time(rep.Len()-1))
	m.jump(rep.Len()-1, "")
	m.setStatus("rewound: "+hint(m.keys.StepBack)+" "+hint(m.keys.Seek)+" "+hint(m.keys.Pause)+" · "+hint(m.keys.Live)+" returns to live", false)
	return nil
}

// backToLive leaves the history's timeline: the live screen as it was,
// then what the sources answered meanwhile, the event log telling what
// changed.
func (m *Model) backToLive() tea.Cmd {
	r := m.rewound
	if r == nil {
		return nil
	}
	m.replay.playing = false
	m.replay.seq++
	m.rewound, m.replay, m.header.replay, m.header.rewound, m.header.recorded = nil, nil, nil, false, nil
	m.keys = r.keys
	m.snaps, m.hasSnap, m.merged, m.events, m.episodes, m.episodesSeen = r.snaps, r.hasSnap, r.merged, r.events, r.eps, true
	m.bind = m.bindings()
	m.layout()
	if m.hasSnap[0] || len(m.snaps) > 0 {
		m.table.SetSnapshot(&m.merged)
		m.gauges.SetSnapshot(&m.snaps[0])
	}
	for i := range m.snaps {
		if s, ok := r.newer[i]; ok {
			m.apply(i, s)
		}
	}
	m.events.Add(m.held...)
	m.held = nil
	m.setStatus("live", false)
	return nil
}

// liveNote is note for what happens live: while rewound it waits, with
// the simulator's events, for the return to live.
func (m *Model) liveNote(o model.Outcome, detail string) {
	if m.rewound != nil {
		m.held = append(m.held, model.Event{Time: m.now(), Worker: "locktop", Outcome: o, Detail: detail})
		return
	}
	m.note(o, detail)
}
