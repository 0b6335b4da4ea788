package pglocks

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// wireRow is one row of SQL: kind, pid, oid, classid, objid, objsubid,
// flag, ts, ts2, ts3, t1…t5, relation, page, tuple, xid.
type wireRow struct {
	kind                int32 // 1 for a pg_locks row, which the server sends with a null kind
	pid                 pgtype.Int4
	oid, classid, objid pgtype.Uint32
	objsubid            pgtype.Int2
	flag                pgtype.Bool
	ts, ts2, ts3        pgtype.Timestamptz
	t1, t2, t3, t4, t5  rawText
	relation, xid       pgtype.Uint32
	page                pgtype.Int4
	tuple               pgtype.Int2
}

// kindOf is a row's kind: the server sends a pg_locks row's as null.
func kindOf(k pgtype.Int4) int32 {
	if !k.Valid {
		return 1
	}
	return k.Int32
}

// rawText is a text column's bytes, only valid until the next row: a lock
// row's locktype and mode are compared, not copied into strings, so the
// 10,000 rows of a busy server allocate none.
type rawText struct {
	b     []byte
	valid bool
}

// str is the text as a string ("" for null).
func (t rawText) str() string { return string(t.b) }

// is reports whether the text is s.
func (t rawText) is(s string) bool { return t.valid && string(t.b) == s }

// equal reports whether the text is s, as str would give it (null is "").
func (t rawText) equal(s string) bool { return string(t.b) == s }

// among is str, as the one of known that the text is when it is one: the
// lock types and modes of thousands of rows a poll are a dozen strings,
// not a string each.
func (t rawText) among(known []string) string {
	for _, k := range known {
		if string(t.b) == k {
			return k
		}
	}
	return t.str()
}

// lockTypes are pg_locks' lock types (src/backend/utils/adt/lockfuncs.c),
// the commonest first.
var lockTypes = [...]string{"transactionid", "tuple", "relation", "virtualxid", "object", "page", "extend",
	"frozenid", "spectoken", "userlock", "advisory", "applytransaction"}

// wireTypes are the column types of SQL, in order.
var wireTypes = [...]uint32{
	pgtype.Int4OID, pgtype.Int4OID, pgtype.OIDOID, pgtype.OIDOID, pgtype.OIDOID, pgtype.Int2OID,
	pgtype.BoolOID, pgtype.TimestamptzOID, pgtype.TimestamptzOID, pgtype.TimestamptzOID,
	pgtype.TextOID, pgtype.TextOID, pgtype.TextOID, pgtype.TextOID, pgtype.TextOID,
	pgtype.OIDOID, pgtype.Int4OID, pgtype.Int2OID, pgtype.XIDOID,
}

// scanner reads SQL's rows into one wireRow. When the server sends
// them with the expected types and every column but the text ones in the
// binary format (pgx's default protocol), it decodes the bytes itself: pgx's Scan runs a scan plan per
// column, 19 per row, and at 10,000 locks that was most of Read' own
// CPU, which a loaded machine multiplies. Otherwise (a text-format
// protocol, as a pooler may impose) it leaves the row to Scan.
type scanner struct {
	r      wireRow
	kind   pgtype.Int4
	text   [5]pgtype.Text // where Scan puts the text columns
	dest   []any          // one slice for every row: a variadic slice per Scan would be an allocation per lock
	binary bool
}

func newScanner(rows pgx.Rows) *scanner {
	s := &scanner{}
	r := &s.r
	s.dest = []any{&s.kind, &r.pid, &r.oid, &r.classid, &r.objid, &r.objsubid, &r.flag,
		&r.ts, &r.ts2, &r.ts3, &s.text[0], &s.text[1], &s.text[2], &s.text[3], &s.text[4],
		&r.relation, &r.page, &r.tuple, &r.xid}
	fds := rows.FieldDescriptions()
	s.binary = len(fds) == len(wireTypes)
	for i := 0; s.binary && i < len(fds); i++ {
		// pgx asks for text columns as text: the same bytes either way.
		s.binary = fds[i].DataTypeOID == wireTypes[i] && (fds[i].Format == pgx.BinaryFormatCode || wireTypes[i] == pgtype.TextOID)
	}
	return s
}

// scan reads the current row into s.r.
func (s *scanner) scan(rows pgx.Rows) error {
	r := &s.r
	if !s.binary {
		if err := rows.Scan(s.dest...); err != nil {
			return err
		}
		r.kind = kindOf(s.kind)
		for i, t := range [...]*rawText{&r.t1, &r.t2, &r.t3, &r.t4, &r.t5} {
			*t = rawText{b: []byte(s.text[i].String), valid: s.text[i].Valid}
		}
		return nil
	}
	v := rows.RawValues()
	if len(v) != len(wireTypes) {
		return fmt.Errorf("pglocks: a row of %d values, want %d", len(v), len(wireTypes))
	}
	var kind pgtype.Int4
	ok := decodeInt4(v[0], &kind) && decodeInt4(v[1], &r.pid) &&
		decodeUint32(v[2], &r.oid) && decodeUint32(v[3], &r.classid) && decodeUint32(v[4], &r.objid) &&
		decodeInt2(v[5], &r.objsubid) && decodeBool(v[6], &r.flag) &&
		decodeTime(v[7], &r.ts) && decodeTime(v[8], &r.ts2) && decodeTime(v[9], &r.ts3) &&
		decodeUint32(v[15], &r.relation) && decodeInt4(v[16], &r.page) && decodeInt2(v[17], &r.tuple) &&
		decodeUint32(v[18], &r.xid)
	if !ok {
		return fmt.Errorf("pglocks: a malformed row")
	}
	r.kind = kindOf(kind)
	r.t1 = rawText{b: v[10], valid: v[10] != nil}
	r.t2 = rawText{b: v[11], valid: v[11] != nil}
	r.t3 = rawText{b: v[12], valid: v[12] != nil}
	r.t4 = rawText{b: v[13], valid: v[13] != nil}
	r.t5 = rawText{b: v[14], valid: v[14] != nil}
	return nil
}

// The decoders below read PostgreSQL's binary send formats; a nil value is
// SQL NULL. Each reports false for a value of the wrong length.

func decodeInt4(b []byte, d *pgtype.Int4) bool {
	if *d = (pgtype.Int4{}); b == nil {
		return true
	}
	if len(b) != 4 {
		return false
	}
	*d = pgtype.Int4{Int32: int32(binary.BigEndian.Uint32(b)), Valid: true}
	return true
}

func decodeUint32(b []byte, d *pgtype.Uint32) bool {
	if *d = (pgtype.Uint32{}); b == nil {
		return true
	}
	if len(b) != 4 {
		return false
	}
	*d = pgtype.Uint32{Uint32: binary.BigEndian.Uint32(b), Valid: true}
	return true
}

func decodeInt2(b []byte, d *pgtype.Int2) bool {
	if *d = (pgtype.Int2{}); b == nil {
		return true
	}
	if len(b) != 2 {
		return false
	}
	*d = pgtype.Int2{Int16: int16(binary.BigEndian.Uint16(b)), Valid: true}
	return true
}

func decodeBool(b []byte, d *pgtype.Bool) bool {
	if *d = (pgtype.Bool{}); b == nil {
		return true
	}
	if len(b) != 1 {
		return false
	}
	*d = pgtype.Bool{Bool: b[0] == 1, Valid: true}
	return true
}

// pgEpoch is 2000-01-01 UTC in microseconds since the Unix epoch: a
// timestamptz is sent as microseconds since then.
const pgEpoch = 946_684_800_000_000

func decodeTime(b []byte, d *pgtype.Timestamptz) bool {
	if *d = (pgtype.Timestamptz{}); b == nil {
		return true
	}
	if len(b) != 8 {
		return false
	}
	switch us := int64(binary.BigEndian.Uint64(b)); us {
	case math.MaxInt64:
		*d = pgtype.Timestamptz{Valid: true, InfinityModifier: pgtype.Infinity}
	case math.MinInt64:
		*d = pgtype.Timestamptz{Valid: true, InfinityModifier: pgtype.NegativeInfinity}
	default:
		*d = pgtype.Timestamptz{Time: time.UnixMicro(us + pgEpoch), Valid: true}
	}
	return true
}

// texts interns the short texts of the rows of other lock types from read
// to read: relation names, tuple ids, transaction ids, database names. A
// server with 100 row waits sends the same few hundred each poll, and a
// string for each was a fifth of a poll's allocations (issue 26). A lookup
// with the bytes converted in the index allocates nothing. The zero texts
// is ready; past maxTexts it starts afresh, so a server that cycles
// through many ids over days does not grow it for ever.
type texts struct{ m map[string]string }

const maxTexts = 4096

// of is b as a string, the one it returned before for the same bytes.
func (x *texts) of(b []byte) string {
	if s, ok := x.m[string(b)]; ok {
		return s
	}
	if x.m == nil || len(x.m) >= maxTexts {
		x.m = make(map[string]string)
	}
	s := string(b)
	x.m[s] = s
	return s
}

// tupleOf is a tuple lock's "(page,tuple)"; "" for a row without a tuple.
func tupleOf(w *wireRow, x *texts) string {
	if !w.tuple.Valid || !w.page.Valid {
		return ""
	}
	var buf [24]byte
	b := append(buf[:0], '(')
	b = strconv.AppendInt(b, int64(w.page.Int32), 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(w.tuple.Int16), 10)
	return x.of(append(b, ')'))
}

// objectOf is what identifies a lock of lockType besides its database,
// relation and tuple: a transaction id, a virtual xid, a page; for the rarer
// types (object, frozenid, spectoken, userlock), the locktag's fields that
// are set, joined by ':' as concat_ws joins them.
func objectOf(lockType string, w *wireRow, x *texts) string {
	switch lockType {
	case "transactionid":
		if w.xid.Valid {
			var buf [10]byte
			return x.of(strconv.AppendUint(buf[:0], uint64(w.xid.Uint32), 10))
		}
		return ""
	case "virtualxid":
		return x.of(w.t4.b)
	case "page":
		if w.page.Valid {
			return "page " + strconv.Itoa(int(w.page.Int32))
		}
		return ""
	case "relation", "tuple", "extend":
		return ""
	}
	var parts []string
	for _, f := range [...]pgtype.Uint32{w.xid, w.classid, w.objid} {
		if f.Valid {
			parts = append(parts, strconv.FormatUint(uint64(f.Uint32), 10))
		}
	}
	if w.objsubid.Valid {
		parts = append(parts, strconv.Itoa(int(w.objsubid.Int16)))
	}
	return strings.Join(parts, ":")
}
