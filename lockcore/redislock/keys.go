package redislock

import (
	"strconv"
	"strings"
	"sync"
)

// SessionKey is seed 002's conversation key without the prefix:
// "tenant:agent:customer:channel".
func SessionKey(tenant, agent, customer, channel string) string {
	return tenant + ":" + agent + ":" + customer + ":" + channel
}

// keyset names the Redis keys of one lock. Every one hashes to the hold's
// cluster slot, so each script touches one slot: the hold is Prefix+key as
// given; the others begin with a hash tag chosen for that slot.
type keyset struct {
	hold  string // the lock itself: a hash {t token, f fence, o owner, s since, c channel}
	queue string // waiters in arrival order: zset token -> arrival (µs)
	info  string // waiters' registrations: hash token -> "deadline ttl channel owner"
	fence string // the slot's fence counter
	tag   string // the slot's hash tag and the prefix: what the others begin with
	keys  [4]string
}

// keysFor names the keys of key's lock. The names are cut from one string
// and the scripts' KEYS (all) kept in the keyset: one allocation an
// acquire, not one a name and one for KEYS.
func keysFor(prefix, key string) keyset {
	tagMax := 1 + slotTagMax() + 1 + len(prefix)
	var b strings.Builder
	// Room for every name, whichever the tag: the builder never grows, so
	// all of them share its one allocation.
	b.Grow(len(prefix) + len(key) + 3*tagMax + len("q:") + len(key) + len("w:") + len(key) + len("fence"))
	b.WriteString(prefix)
	b.WriteString(key)
	hold := b.String()
	t := slotTag(keySlot(hold))
	tagLen := 1 + len(t) + 1 + len(prefix)
	for _, s := range [...]string{"{", t, "}", prefix, "q:", key, "{", t, "}", prefix, "w:", key, "{", t, "}", prefix, "fence"} {
		b.WriteString(s)
	}
	rest := b.String()[len(hold):]
	queue := rest[:tagLen+len("q:")+len(key)]
	rest = rest[len(queue):]
	info := rest[:tagLen+len("w:")+len(key)]
	fence := rest[len(info):]
	ks := keyset{hold: hold, queue: queue, info: info, fence: fence, tag: queue[:tagLen]}
	ks.keys = [4]string{ks.hold, ks.queue, ks.info, ks.fence}
	return ks
}

// forced names the record of one ForceRelease call (id), in the hold's
// slot, which makes a retried call harmless.
func (k keyset) forced(id string) string { return k.tag + "forced:" + id }

// all returns the keys the scripts take, in their order. The slice is
// the keyset's own: its capacity is its length, so an append copies it.
func (k *keyset) all() []string { return k.keys[:] }

// auditKey is the stream of force releases under prefix.
func auditKey(prefix string) string { return "{" + prefix + "}audit" }

// keySlot is Redis Cluster's HASH_SLOT: CRC16 of the key, or of its hash
// tag (the text between the first '{' and the next '}', if not empty).
func keySlot(key string) int {
	if s := strings.IndexByte(key, '{'); s >= 0 {
		if e := strings.IndexByte(key[s+1:], '}'); e > 0 {
			key = key[s+1 : s+1+e]
		}
	}
	return int(crc16(key) % 16384)
}

// slotTag returns a short tag that hashes to slot. One fence counter per
// slot, named with it, serves every lock in the slot: at most 16,384
// counters, however many keys come and go (Redisson's per-lock counters
// were never deleted: 25 M leftovers, redisson#6510).
func slotTag(slot int) string { return slotTags()[slot] }

var slotTags = sync.OnceValue(func() *[16384]string {
	var t [16384]string
	left := len(t)
	for n := int64(0); left > 0; n++ {
		s := strconv.FormatInt(n, 36)
		if sl := crc16(s) % 16384; t[sl] == "" {
			t[sl] = s
			left--
		}
	}
	return &t
})

// crc16 is CRC-16/XMODEM (polynomial 0x1021), as Redis Cluster uses.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc = crc<<8 ^ crcTable[byte(crc>>8)^s[i]]
	}
	return crc
}

// slotTagMax is the length of the longest slot tag.
var slotTagMax = sync.OnceValue(func() int {
	n := 0
	for _, t := range slotTags() {
		n = max(n, len(t))
	}
	return n
})

var crcTable = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()
