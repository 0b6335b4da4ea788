// Package htmlreport renders an incident review as one self-contained HTML
// file (locktop report --html, serve's /report): a Gantt-like lane per key
// with every holder's and waiter's bar, the contention episodes shaded, the
// queue length as a chart, lease expiries and source outages as marks, and
// the report's tables linking into the lanes.
//
// It is fed by incident.Report for the episodes, tables and marks, and
// reads the frames once more itself for the bars (timeline.go), which the
// report does not keep. The page has no script and loads nothing: styles
// and SVG are inline, and a Content-Security-Policy forbids scripts, so a
// file attached to a post-mortem reads the same offline for years.
//
// Strings from the database (queries, application names, owners, keys)
// go through html/template's contextual escaping, and the characters a
// terminal or a text layout would act on (controls, bidi overrides) are
// shown as visible ⟨U+202E⟩ escapes instead (termsafe.Control): nothing
// from a recording can run script or reorder the page's text.
//
// A screen shows only so many lanes: beyond MaxLanes keys, or MaxBars bars
// in a lane, the page aggregates and says so.
package htmlreport
