// Package redislocks lists the session locks lockcore/redislock holds
// under a key prefix, with their owners, fences, TTLs and registered
// waiters, by a bounded SCAN of every node (Read). It is the monitor's
// reader, kept out of redislock's exported surface; the key layout it
// reads is redislock's (keys.go there): the hold hash at prefix+key, the
// queue and registrations at "{tag}"+prefix+"q:"/"w:"+key.
package redislocks
