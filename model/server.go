package model

import "strings"

// SourceName is the name of source src of target server in a snapshot of
// several targets ("b/postgres", "b/redis"); with the one unnamed target it
// is src alone, as before.
func SourceName(server, src string) string {
	if server == "" {
		return src
	}
	return server + "/" + src
}

// SplitSource is SourceName undone: the target and the source a source's
// name names ("", "redis" for a name without a target).
func SplitSource(name string) (server, src string) {
	if s, rest, ok := strings.Cut(name, "/"); ok {
		return s, rest
	}
	return "", name
}

// Servers are the distinct targets of s's sources, in order of their
// first source; none for a snapshot of the one unnamed target.
func (s *Snapshot) Servers() []string {
	var out []string
	for _, st := range s.Sources {
		if sv, _ := SplitSource(st.Name); sv != "" && (len(out) == 0 || out[len(out)-1] != sv) {
			out = append(out, sv)
		}
	}
	return out
}

// ServerKeyLabel is KeyLabel after the lock's server when it has one
// ("b: AGENT 7"): the same key on two servers is two locks.
func (l *Lock) ServerKeyLabel() string {
	if l.Server != "" {
		return l.Server + ": " + l.KeyLabel()
	}
	return l.KeyLabel()
}
