package httpapi

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/locktop/locktop/internal/record/history"
	"github.com/locktop/locktop/internal/record/htmlreport"
	"github.com/locktop/locktop/internal/record/incident"
	"github.com/locktop/locktop/internal/record/recording"
)

// Past is the recent past a handler answers questions about: a
// *history.History.
type Past interface {
	// Recording is the past kept so far, as one recording.
	Recording() (*recording.Recording, error)
	// Bytes is the same as the bytes of a recording file.
	Bytes() ([]byte, error)
}

// The past's endpoints, all answered from the history the process keeps
// (never a query to the server):
//
//	GET /api/locks?at=TIME         the /api/locks document as it was at TIME
//	GET /api/report?from=T&to=T    locktop report's JSON over that span (default: all kept)
//	GET /report?from=T&to=T        locktop report --html's page over that span
//	GET /api/history               the kept past as one recording file
//	                               (locktop replay and report read it from http://HOST:PORT)
//
// TIME is RFC 3339, a time of day today (server's local time) or -5m; a
// time outside the kept past is a 400 whose error names the kept range.

// Bounds of the work one request of the past may ask for, whatever it asks:
// a report spans at most MaxReportSpan (a wider from/to is a 400 naming the
// cap), and at most PastSlots() of the past's requests run at once (more
// wait up to PastWait, then get 503 with Retry-After): each reads the kept
// history, so a flood of them must not take the process's CPU from its
// polls.
const (
	MaxReportSpan   = time.Hour
	MaxPastRequests = 2
)

// PastSlots is how many of the past's requests run at once:
// MaxPastRequests, or one where the process may use two CPUs or fewer, so
// that a flood of them leaves a CPU to the polls and the dashboard.
func PastSlots() int {
	if runtime.GOMAXPROCS(0) <= 2 {
		return 1
	}
	return MaxPastRequests
}

// PastWait is how long a request of the past waits for a slot before it
// is answered 503: a waiting request takes no CPU, where one answered at
// once comes straight back.
const PastWait = time.Second

// pastSlots admits the past's requests, PastSlots() at a time (a request
// waits up to PastWait for one), and paces them: after a request that
// worked for d, the next begins its work no sooner than d later (it waits,
// holding its slot). A lone client hardly notices; a flood gets at most
// half of each slot's CPU, and 503s.
type pastSlots struct {
	c    chan struct{}
	mu   sync.Mutex
	rest time.Time // no request's work begins before it
}

func newPastSlots() *pastSlots { return &pastSlots{c: make(chan struct{}, PastSlots())} }

// enter takes a slot and waits out the rest, or answers 503 and reports
// false. A true enter must be followed by leave with the time it returned.
func (p *pastSlots) enter(w http.ResponseWriter, req *http.Request) (time.Time, bool) {
	wait := time.NewTimer(PastWait)
	defer wait.Stop()
	select {
	case p.c <- struct{}{}:
	case <-req.Context().Done():
		return time.Time{}, false // the client went away
	case <-wait.C:
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, pastError{Error: "busy: at most " + strconv.Itoa(cap(p.c)) + " requests of the history are answered at once"})
		return time.Time{}, false
	}
	p.mu.Lock()
	rest := time.Until(p.rest)
	p.mu.Unlock()
	if rest > 0 {
		t := time.NewTimer(rest)
		defer t.Stop()
		select {
		case <-t.C:
		case <-req.Context().Done():
			<-p.c
			return time.Time{}, false // the client went away
		}
	}
	return time.Now(), true
}

// leave gives the slot back, and sets the rest after a request whose work
// began at start.
func (p *pastSlots) leave(start time.Time) {
	now := time.Now()
	p.mu.Lock()
	if r := now.Add(now.Sub(start)); r.After(p.rest) {
		p.rest = r
	}
	p.mu.Unlock()
	<-p.c
}

// pastError is the body of a 400 or 503 of the past's endpoints.
type pastError struct {
	Error string `json:"error"`
	// First and Last are the kept range, when there is one.
	First *time.Time `json:"first,omitempty"`
	Last  *time.Time `json:"last,omitempty"`
}

// recording returns the kept past, or answers why there is none.
func (h *handler) recording(w http.ResponseWriter) (*recording.Recording, bool) {
	if h.d.Past == nil {
		writeJSON(w, http.StatusNotFound, pastError{Error: "this locktop keeps no history (--history-keep 0)"})
		return nil, false
	}
	r, err := h.d.Past.Recording()
	if errors.Is(err, history.ErrEmpty) || (err == nil && r.Len() == 0) {
		writeJSON(w, http.StatusServiceUnavailable, pastError{Error: "the history holds nothing yet"})
		return nil, false
	}
	if err != nil {
		h.d.Log.Warn("reading the history", "err", err.Error())
		writeJSON(w, http.StatusInternalServerError, pastError{Error: "reading the history: " + oneLine(err.Error())})
		return nil, false
	}
	return r, true
}

// moment reads query parameter name as a moment within r's span, or
// answers 400 naming the span.
func (h *handler) moment(w http.ResponseWriter, req *http.Request, r *recording.Recording, name string, dflt time.Time) (time.Time, bool) {
	text := req.URL.Query().Get(name)
	if text == "" {
		return dflt, true
	}
	first, last := r.Span()
	t, err := history.ParseTime(text, time.Now())
	if err == nil {
		err = history.InRange(t, first, last, 2*r.Header.Interval)
	}
	if err != nil {
		writeJSON(w, http.StatusBadRequest, pastError{Error: name + "=" + oneLine(err.Error()), First: timePtr(first), Last: timePtr(last)})
		return t, false
	}
	return t, true
}

// locksAt serves GET /api/locks?at=TIME.
func (h *handler) locksAt(w http.ResponseWriter, req *http.Request) {
	start, ok := h.past.enter(w, req)
	if !ok {
		return
	}
	defer h.past.leave(start)
	r, ok := h.recording(w)
	if !ok {
		return
	}
	at, ok := h.moment(w, req, r, "at", time.Time{})
	if !ok {
		return
	}
	snap, err := r.Merged(r.Index(at))
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, pastError{Error: "reading the history: " + oneLine(err.Error())})
		return
	}
	doc := NewLocksDocument(snap, r.Info())
	doc.At = &at
	doc.Age = seconds(max(at.Sub(snap.Taken), 0))
	writeJSON(w, http.StatusOK, doc)
}

// report serves GET /api/report?from=&to=.
func (h *handler) report(w http.ResponseWriter, req *http.Request) {
	start, ok := h.past.enter(w, req)
	if !ok {
		return
	}
	defer h.past.leave(start)
	r, from, to, ok := h.span(w, req)
	if !ok {
		return
	}
	rep, err := incident.Build(r, r.Header.Server, from, to)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, pastError{Error: "reading the history: " + oneLine(err.Error())})
		return
	}
	rep.Damaged = len(r.Damage)
	writeJSON(w, http.StatusOK, rep)
}

// reportPage serves GET /report?from=&to=: the same review as the HTML
// page locktop report --html writes, under the same bounds.
func (h *handler) reportPage(w http.ResponseWriter, req *http.Request) {
	start, ok := h.past.enter(w, req)
	if !ok {
		return
	}
	defer h.past.leave(start)
	r, from, to, ok := h.span(w, req)
	if !ok {
		return
	}
	rep, tl, err := htmlreport.Review(r, r.Header.Server, from, to)
	var b bytes.Buffer
	if err == nil {
		rep.Damaged = len(r.Damage)
		err = htmlreport.Write(&b, rep, tl, htmlreport.Options{Location: time.Local, Sources: r.Header.Sources, Recorded: r.Header.Locktop, Version: h.d.Version})
	}
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, pastError{Error: "rendering the report: " + oneLine(err.Error())})
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	// The page's own policy, also as a header: no script, nothing loaded.
	w.Header().Set("Content-Security-Policy", htmlreport.ContentSecurityPolicy)
	_, _ = w.Write(b.Bytes())
}

// span reads ?from=&to= over the kept past, or answers why not (a 400
// names the kept range or the span's cap).
func (h *handler) span(w http.ResponseWriter, req *http.Request) (r *recording.Recording, from, to time.Time, ok bool) {
	r, ok = h.recording(w)
	if !ok {
		return nil, from, to, false
	}
	first, last := r.Span()
	if from, ok = h.moment(w, req, r, "from", first); !ok {
		return nil, from, to, false
	}
	if to, ok = h.moment(w, req, r, "to", last); !ok {
		return nil, from, to, false
	}
	if to.Before(from) {
		writeJSON(w, http.StatusBadRequest, pastError{Error: "to is before from"})
		return nil, from, to, false
	}
	if to.Sub(from) > MaxReportSpan {
		writeJSON(w, http.StatusBadRequest, pastError{Error: fmt.Sprintf("from %s to %s spans %s: a report spans at most %s; ask for a narrower range",
			from.Format(time.RFC3339), to.Format(time.RFC3339), to.Sub(from).Round(time.Second), MaxReportSpan), First: timePtr(first), Last: timePtr(last)})
		return nil, from, to, false
	}
	return r, from, to, true
}

// historyFile serves GET /api/history: the kept past as one recording.
func (h *handler) historyFile(w http.ResponseWriter, req *http.Request) {
	start, ok := h.past.enter(w, req)
	if !ok {
		return
	}
	defer h.past.leave(start)
	if h.d.Past == nil {
		writeJSON(w, http.StatusNotFound, pastError{Error: "this locktop keeps no history (--history-keep 0)"})
		return
	}
	data, err := h.d.Past.Bytes()
	if errors.Is(err, history.ErrEmpty) {
		writeJSON(w, http.StatusServiceUnavailable, pastError{Error: "the history holds nothing yet"})
		return
	}
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, pastError{Error: "reading the history: " + oneLine(err.Error())})
		return
	}
	w.Header().Set("Content-Type", "application/vnd.locktop.recording")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(data)
}
