package redislock

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"testing"
)

// TestKeysForNames: the names keysFor cuts from one string are the ones
// the scripts and monitors expect: the hold as given, the others behind
// the hold's slot tag and the prefix; all() in the scripts' order, and an
// append to it never writes into the shared slice.
func TestKeysForNames(t *testing.T) {
	for _, c := range [][2]string{{"", "k"}, {"app:", "t:a:c:ch"}, {"p{x}:", "k"}, {"p:", "{tag}rest"}, {"", ""}} {
		prefix, key := c[0], c[1]
		ks := keysFor(prefix, key)
		tag := "{" + slotTag(keySlot(prefix+key)) + "}" + prefix
		want := keyset{hold: prefix + key, queue: tag + "q:" + key, info: tag + "w:" + key, fence: tag + "fence", tag: tag}
		if ks.hold != want.hold || ks.queue != want.queue || ks.info != want.info || ks.fence != want.fence || ks.tag != want.tag {
			t.Errorf("keysFor(%q, %q) = %+v, want %+v", prefix, key, ks, want)
		}
		all := ks.all()
		if !slices.Equal(all, []string{want.hold, want.queue, want.info, want.fence}) {
			t.Errorf("keysFor(%q, %q).all() = %q", prefix, key, all)
		}
		more := append(all, "extra")
		more[0] = "changed"
		if ks.all()[0] != want.hold {
			t.Errorf("keysFor(%q, %q): an append to all() changed the keyset", prefix, key)
		}
	}
}

// TestKeysForAllocates once: the names share one string and KEYS lives in
// the keyset (an acquire made six allocations here, one a name and one for
// KEYS).
func TestKeysForAllocatesOnce(t *testing.T) {
	slotTagMax() // the tables are made once, before
	n := 0
	if a := testing.AllocsPerRun(100, func() {
		ks := keysFor("app:", "tenant:agent:customer:web")
		n += len(ks.all()[3])
	}); a > 1 {
		t.Errorf("keysFor made %v allocations, want 1", a)
	}
	if n == 0 {
		t.Error("no keys")
	}
}

// TestSlotTagsNeverChange: the slot tags name the fence counters and
// queues in Redis, so a table made otherwise must come out the same: the
// digest is of the table as first released.
func TestSlotTagsNeverChange(t *testing.T) {
	tags := slotTags()
	sum := sha256.Sum256([]byte(strings.Join(tags[:], ",")))
	if got := hex.EncodeToString(sum[:]); got != "a3215d917d1d893709d4388eac78ee4c1f29fd0325a1f1340103fbf56567281e" {
		t.Errorf("slot tags changed: digest %s (slot 0 %q, 1 %q, 16383 %q)", got, tags[0], tags[1], tags[16383])
	}
}
