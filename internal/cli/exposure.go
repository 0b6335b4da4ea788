package cli

import (
	"fmt"
	"net"
	"strings"

	"github.com/locktop/locktop/internal/querytext"
	"github.com/locktop/locktop/internal/serve/httpapi"
)

// exposureFlags are what a command that serves or records may reveal of
// the watched sessions, and to whom: --web.config.file (TLS and
// authentication, the file Prometheus exporters take) and --query-text.
type exposureFlags struct {
	webConfig *string // nil for a command that does not serve
	queryText *string
}

// addExposureFlags adds --query-text, and --web.config.file when serving
// is true.
func addExposureFlags(fs *flagSet, serving bool) *exposureFlags {
	f := &exposureFlags{}
	def := "full"
	if serving {
		f.webConfig = fs.String("web.config.file", "", "TLS and authentication for the endpoints: a Prometheus exporter web configuration `file` (certificates, client certificates, bcrypt basic-auth users)")
		def = "full on loopback, normalized elsewhere"
	}
	f.queryText = fs.String("query-text", "", "`MODE`: how much of each session's query leaves the process (endpoints, recordings, history): full, normalized (literals replaced by $n) or none (default "+def+")")
	return f
}

// exposure is what the flags resolved to for one listener (nil when not
// serving).
type exposure struct {
	web       httpapi.WebConfig
	queryText querytext.Mode
	// warning is "" when the endpoints are reachable from this machine
	// only; otherwise it says what others can reach and read.
	warning string
}

// resolve reads the web configuration and picks the query text mode: by
// default full text on loopback and normalized text for an address other
// machines can reach. A bad file or mode is bad usage.
func (f *exposureFlags) resolve(ln net.Listener) (exposure, error) {
	var e exposure
	if f.webConfig != nil && *f.webConfig != "" && ln == nil {
		return e, usagef("--web.config.file secures the endpoints of --http: give --http too")
	}
	if f.webConfig != nil && *f.webConfig != "" {
		wc, err := httpapi.LoadWebConfig(*f.webConfig)
		if err != nil {
			return e, usagef("--web.config.file: %v", err)
		}
		e.web = wc
	}
	exposed := ln != nil && !httpapi.IsLoopback(ln.Addr())
	switch {
	case *f.queryText != "":
		m, err := querytext.ParseMode(*f.queryText)
		if err != nil {
			return e, usagef("--query-text: %v", err)
		}
		e.queryText = m
	case exposed:
		e.queryText = querytext.Normalized
	}
	if exposed {
		e.warning = exposureWarning(ln.Addr(), e.web, e.queryText)
	}
	return e, nil
}

// exposureWarning says what an address reachable from other machines
// gives them: which query text, over what, to whom.
func exposureWarning(a net.Addr, wc httpapi.WebConfig, qt querytext.Mode) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s is reachable from other machines; ", a)
	switch qt {
	case querytext.Full:
		b.WriteString("the endpoints show every session's query text in full (--query-text full)")
	case querytext.Normalized:
		b.WriteString("the endpoints show sessions' queries normalized, literals replaced by $n (--query-text)")
	default:
		b.WriteString("the endpoints show no query text (--query-text none)")
	}
	switch {
	case wc.Open() && !wc.TLS:
		b.WriteString(", over plain HTTP, to anyone who reaches the port (--web.config.file adds TLS and authentication)")
	case wc.Open():
		b.WriteString(", over TLS, to anyone who reaches the port (--web.config.file can require users or client certificates)")
	case !wc.TLS:
		b.WriteString(", to authenticated users, over plain HTTP (passwords cross the network in the clear: add TLS to --web.config.file)")
	}
	return b.String()
}
