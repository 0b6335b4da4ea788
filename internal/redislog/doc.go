// Package redislog routes go-redis's own log lines (dial failures, pool
// errors), which it otherwise writes to the process's stderr, over the
// dashboard's screen and past --log, through the project's logger.
//
// go-redis has one logger per process (redis.SetLogger), so Install is
// process-wide. A failing Redis makes go-redis log the same line on every
// attempt; here a line is logged once, when it first appears, and again only
// after Healthy says Redis answered, or a minute later with the count of
// repeats left out.
package redislog
