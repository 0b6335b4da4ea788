package model

import "strings"

// The lock family stamps one owner id per process on every lock it takes, of
// every kind: the Redis value's owner, the lease owner, and, for advisory locks,
// the lock connection's application_name, the one per-session string a monitor
// can read from pg_stat_activity. The monitor reads it back with OwnerFromApp,
// so a PostgreSQL backend and a Redis or lease owner with the same id are known
// to be the same holder.

// ownerMark separates an application name from the owner id it carries.
const ownerMark = " owner="

// maxAppName is PostgreSQL's limit on application_name (NAMEDATALEN-1 bytes);
// the server truncates anything longer.
const maxAppName = 63

// AppWithOwner returns the application_name that carries owner after app. app is
// shortened (never owner) so the result fits PostgreSQL's 63 bytes; an owner
// too long to fit at all is returned alone, truncated, and will not read back.
func AppWithOwner(app, owner string) string {
	if owner == "" {
		return app
	}
	room := maxAppName - len(ownerMark) - len(owner)
	if room < 0 {
		return owner[:maxAppName]
	}
	if len(app) > room {
		app = app[:room]
	}
	return app + ownerMark + owner
}

// OwnerFromApp returns the owner id an application_name carries (written by
// AppWithOwner), and the application name without it. ok is false when the name
// carries none.
func OwnerFromApp(appName string) (app, owner string, ok bool) {
	i := strings.LastIndex(appName, ownerMark)
	if i < 0 || i+len(ownerMark) == len(appName) {
		return appName, "", false
	}
	return appName[:i], appName[i+len(ownerMark):], true
}
