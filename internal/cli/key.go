package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/lockcore/registry"
)

func init() {
	register(command{name: "key", summary: "turn a string into its advisory lock key: the FNV-1a id, the SQL that takes it, its registry entry",
		about: `STRING is hashed as the MAIS lock registry's hashString does (FNV-1a over UTF-16, 32-bit
signed), the one-bigint key MAIS takes with pg_advisory_xact_lock(hashString(s)). A key as the
dashboard shows it ("AGENT 7", "IDEMPOTENCY_CLEANUP", "5 -3", "42424242") is that key;
--hash hashes it as a string instead.`,
		run: runKey})
}

func runKey(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("key")
	fs.args = "STRING"
	space := fs.Int32("space", 0, "also show the two-int key (`SPACE`, hash) that lockcore.KeyFromString takes (a different lock)")
	hash := fs.Bool("hash", false, "hash STRING even when it reads as a key label")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch fs.NArg() {
	case 0:
		return usagef("key: no STRING given (usage: locktop key STRING)")
	case 1:
	default:
		return usagef("key: one STRING only, got %d (quote a string with spaces)", fs.NArg())
	}
	s := fs.Arg(0)
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	if k, ok := parseLabel(s); ok && !*hash {
		writeKey(tw, "key", k, "")
		fmt.Fprintf(tw, "\t(a key label; --hash hashes the string instead)\n")
		return tw.Flush()
	}
	id := registry.FNV1a32(s)
	fmt.Fprintf(tw, "string\t%s\n", strconv.Quote(s))
	fmt.Fprintf(tw, "FNV-1a\t%d  (the MAIS lock registry's hashString; lockcore.HashKey)\n", id)
	xact := ""
	if e, ok := registry.Match(registry.Hashed, s); ok {
		fmt.Fprintf(tw, "registry\t%s %s  (%s: %s)\n", e.Name, e.Pattern, e.Owner, e.Purpose)
		if strings.Contains(e.LockType, "xact") {
			xact = e.Name
		}
	} else {
		fmt.Fprintf(tw, "registry\tno registered pattern matches  (locktop registry lists them)\n")
	}
	writeKey(tw, "one bigint", lockcore.HashKey(s), xact)
	if fs.Changed("space") {
		writeKey(tw, "two int", lockcore.KeyFromString(*space, s), "")
	}
	return tw.Flush()
}

// writeKey writes the SQL that takes k, the pg_locks row it shows as and
// its label in the dashboard. xact names the registry entry that takes it
// in a transaction, if one does.
func writeKey(w io.Writer, title string, k lockcore.Key, xact string) {
	args := strconv.FormatInt(k.Int64(), 10)
	objsubid := 1
	if k.IsPair() {
		args = fmt.Sprintf("%d, %d", k.Space(), k.ID())
		objsubid = 2
	}
	session := fmt.Sprintf("SELECT pg_advisory_lock(%s);", args)
	txn := fmt.Sprintf("SELECT pg_advisory_xact_lock(%s);", args)
	if xact != "" {
		fmt.Fprintf(w, "%s\t%s  -- in a transaction, as %s takes it\n", title, txn, xact)
		fmt.Fprintf(w, "\t%s  -- for the session\n", session)
	} else {
		fmt.Fprintf(w, "%s\t%s  -- for the session\n", title, session)
		fmt.Fprintf(w, "\t%s  -- in a transaction\n", txn)
	}
	fmt.Fprintf(w, "\tpg_locks: locktype = 'advisory' AND classid = %d AND objid = %d AND objsubid = %d\n",
		uint32(k.Space()), uint32(k.ID()), objsubid)
	fmt.Fprintf(w, "\tlocktop shows it as %s\n", k)
}

// parseLabel reads s as the dashboard labels keys (registry.AdvisoryLabel):
// "AGENT 7", "IDEMPOTENCY_CLEANUP", "5 -3", or a one-bigint key's number.
func parseLabel(s string) (lockcore.Key, bool) {
	f := strings.Fields(s)
	switch len(f) {
	case 1:
		if v, err := strconv.ParseInt(f[0], 10, 64); err == nil {
			return lockcore.Int64(v), true
		}
		if e, ok := registry.Lookup(f[0]); ok && e.Kind == registry.Fixed {
			return lockcore.Int64(e.ID), true
		}
	case 2:
		id, err := strconv.ParseInt(f[1], 10, 32)
		if err != nil {
			return lockcore.Key{}, false
		}
		if sp, err := strconv.ParseInt(f[0], 10, 32); err == nil {
			return lockcore.Pair(int32(sp), int32(id)), true
		}
		if e, ok := registry.Lookup(f[0]); ok && e.Kind == registry.Space {
			return lockcore.Pair(int32(e.ID), int32(id)), true
		}
	}
	return lockcore.Key{}, false
}
