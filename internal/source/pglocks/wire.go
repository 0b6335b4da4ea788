package pglocks

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// wireRow is one row of SQL: kind, pid, oid, classid, objid,
// objsubid, share, granted, ts, ts2, t1…t5, ts3.
type wireRow struct {
	kind                int32
	pid                 pgtype.Int4
	oid, classid, objid pgtype.Uint32
	objsubid            pgtype.Int2
	share, granted      pgtype.Bool
	ts, ts2, ts3        pgtype.Timestamptz
	t1, t2, t3, t4, t5  pgtype.Text
}

// wireTypes are the column types of SQL, in order.
var wireTypes = [...]uint32{
	pgtype.Int4OID, pgtype.Int4OID, pgtype.OIDOID, pgtype.OIDOID, pgtype.OIDOID, pgtype.Int2OID,
	pgtype.BoolOID, pgtype.BoolOID, pgtype.TimestamptzOID, pgtype.TimestamptzOID,
	pgtype.TextOID, pgtype.TextOID, pgtype.TextOID, pgtype.TextOID, pgtype.TextOID, pgtype.TimestamptzOID,
}

// scanner reads SQL's rows into one wireRow. When the server sends
// them with the expected types and every column but the text ones in the
// binary format (pgx's default protocol), it decodes the bytes itself: pgx's Scan runs a scan plan per
// column, 16 per row, and at 10,000 locks that was most of Read' own
// CPU, which a loaded machine multiplies. Otherwise (a text-format
// protocol, as a pooler may impose) it leaves the row to Scan.
type scanner struct {
	r      wireRow
	dest   []any // one slice for every row: a variadic slice per Scan would be an allocation per lock
	binary bool
}

func newScanner(rows pgx.Rows) *scanner {
	s := &scanner{}
	r := &s.r
	s.dest = []any{&r.kind, &r.pid, &r.oid, &r.classid, &r.objid, &r.objsubid, &r.share, &r.granted,
		&r.ts, &r.ts2, &r.t1, &r.t2, &r.t3, &r.t4, &r.t5, &r.ts3}
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
	if !s.binary {
		return rows.Scan(s.dest...)
	}
	v := rows.RawValues()
	if len(v) != len(wireTypes) {
		return fmt.Errorf("pglocks: a row of %d values, want %d", len(v), len(wireTypes))
	}
	r := &s.r
	var kind pgtype.Int4
	ok := decodeInt4(v[0], &kind) && decodeInt4(v[1], &r.pid) &&
		decodeUint32(v[2], &r.oid) && decodeUint32(v[3], &r.classid) && decodeUint32(v[4], &r.objid) &&
		decodeInt2(v[5], &r.objsubid) && decodeBool(v[6], &r.share) && decodeBool(v[7], &r.granted) &&
		decodeTime(v[8], &r.ts) && decodeTime(v[9], &r.ts2)
	if !ok || !decodeTime(v[15], &r.ts3) {
		return fmt.Errorf("pglocks: a malformed row")
	}
	r.kind = kind.Int32
	decodeText(v[10], &r.t1)
	decodeText(v[11], &r.t2)
	decodeText(v[12], &r.t3)
	decodeText(v[13], &r.t4)
	decodeText(v[14], &r.t5)
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

func decodeText(b []byte, d *pgtype.Text) {
	if b == nil {
		*d = pgtype.Text{}
		return
	}
	*d = pgtype.Text{String: string(b), Valid: true}
}
