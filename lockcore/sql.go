package lockcore

import "strings"

// statements holds the SQL of one key shape, for one Service.
//
// With fencing on, the lock statements mint the fence in the same
// statement, after the grant: CASE evaluates its condition before its
// result (PostgreSQL, "Expression Evaluation Rules"), so nextval runs only
// once the lock call has returned, and a wait that fails draws no number.
// pg_advisory_lock returns void, which IS NOT NULL. A try returns NULL when
// the key is held elsewhere. lockWithin's WHERE clause has no column
// references, so it is a one-time filter evaluated before the select list:
// lock_timeout is set, local to the statement's implicit transaction, before
// the wait begins.
//
// A fence must be durable before its grant is reported: with
// synchronous_commit off a crash could hand out the same fences again. So
// the implicit transaction of a fencing statement commits with
// synchronous_commit on, and the server answers after the commit. A
// Service with a pool of its own sets it once per connection, with
// lock_timeout (prepareSession); a SharedPool Service's statements set it
// for themselves (durable), local to their transaction. Either way it costs
// a flush only when nextval writes WAL (once in 32 calls, and first after
// each checkpoint), and no round trip.
type statements struct{ lock, lockWithin, try, unlock, xact, tryXact string }

// args are the placeholders of each key shape.
const (
	pairArgs   = "$1::int4, $2::int4"
	singleArgs = "$1::int8"
)

func pairStatements(seq string, durable bool) statements {
	return build(pairArgs, "$3", seq, durable)
}

func singleStatements(seq string, durable bool) statements {
	return build(singleArgs, "$2", seq, durable)
}

// build writes the statements for a key shape whose placeholders are args,
// with lt the placeholder of lockWithin's lock_timeout, fencing with seq
// (quoted) unless it is "", and with durable, fencing statements that set
// synchronous_commit on for themselves.
func build(args, lt, seq string, durable bool) statements {
	// seq goes inside a string literal (nextval takes a regclass).
	r := strings.NewReplacer("ARGS", args, "LT", lt, "SEQ", strings.ReplaceAll(seq, "'", "''"))
	st := statements{
		unlock:  r.Replace("SELECT pg_advisory_unlock(ARGS)"),
		xact:    r.Replace("SELECT pg_advisory_xact_lock(ARGS)"),
		tryXact: r.Replace("SELECT pg_try_advisory_xact_lock(ARGS)"),
	}
	timeout := "set_config('lock_timeout', LT, true) IS NOT NULL"
	if seq == "" {
		st.lock = r.Replace("SELECT pg_advisory_lock(ARGS)")
		st.lockWithin = r.Replace("SELECT pg_advisory_lock(ARGS) WHERE " + timeout)
		st.try = r.Replace("SELECT pg_try_advisory_lock(ARGS)")
		return st
	}
	lock := "SELECT CASE WHEN pg_advisory_lock(ARGS) IS NOT NULL THEN nextval('SEQ') END"
	try := "SELECT CASE WHEN pg_try_advisory_lock(ARGS) THEN nextval('SEQ') END"
	if !durable {
		st.lock, st.lockWithin, st.try = r.Replace(lock), r.Replace(lock+" WHERE "+timeout), r.Replace(try)
		return st
	}
	sync := "set_config('synchronous_commit', 'on', true) IS NOT NULL"
	st.lock = r.Replace(lock + " WHERE " + sync)
	st.lockWithin = r.Replace(lock + " WHERE " + timeout + " AND " + sync)
	st.try = r.Replace(try + " WHERE " + sync)
	return st
}

// sql returns s's statements for k.
func (s *Service) sql(k Key) *statements {
	if k.pair {
		return &s.pair
	}
	return &s.single
}

// plainPair and plainSingle are the statements without fencing: the
// transaction locks take theirs from here.
var plainPair, plainSingle = pairStatements("", false), singleStatements("", false)

func plainSQL(k Key) *statements {
	if k.pair {
		return &plainPair
	}
	return &plainSingle
}

// keyArgs returns the statement arguments for k followed by extra.
func keyArgs(k Key, extra ...any) []any {
	if k.pair {
		return append([]any{k.hi, k.lo}, extra...)
	}
	return append([]any{k.Int64()}, extra...)
}
