package recording

import (
	"reflect"
	"testing"
	"time"

	"github.com/locktop/locktop/model"
)

// sameLock must see a change in every field of model.Lock and of its
// Backend: one it missed would store a changed lock with its old bytes.
func TestSameLockSeesEveryField(t *testing.T) {
	base := model.Lock{Kind: model.KindAdvisory, PID: 7, Backend: &model.Backend{QueryStart: time.Unix(100, 0)}, BlockedBy: []int32{1}, BlockedByOwners: []string{"a"}}
	if !sameLock(&base, &base) {
		t.Fatal("a lock differs from itself")
	}
	// other is base with fresh (equal, not shared) slices and Backend.
	other := func() model.Lock {
		o := base
		o.BlockedBy, o.BlockedByOwners = []int32{1}, []string{"a"}
		b := *base.Backend
		o.Backend = &b
		return o
	}
	if o := other(); !sameLock(&base, &o) {
		t.Fatal("a lock differs from its copy")
	}
	typ := reflect.TypeOf(base)
	for i := range typ.NumField() {
		if typ.Field(i).Name == "Backend" {
			o := other()
			if o.Backend = nil; sameLock(&base, &o) {
				t.Error("sameLock misses a row without a Backend")
			}
			btyp := reflect.TypeOf(*base.Backend)
			for j := range btyp.NumField() {
				o := other()
				change(t, reflect.ValueOf(o.Backend).Elem().Field(j), btyp.Field(j).Name)
				if sameLock(&base, &o) {
					t.Errorf("sameLock misses a change of Backend.%s", btyp.Field(j).Name)
				}
			}
			continue
		}
		o := other()
		change(t, reflect.ValueOf(&o).Elem().Field(i), typ.Field(i).Name)
		if sameLock(&base, &o) {
			t.Errorf("sameLock misses a change of %s", typ.Field(i).Name)
		}
	}
}

// change sets the field f (named name) to another value.
func change(t *testing.T, f reflect.Value, name string) {
	t.Helper()
	switch v := f.Addr().Interface().(type) {
	case *time.Time:
		*v = v.Add(time.Second)
	case *[]int32:
		*v = append(*v, 2)
	case *[]string:
		*v = append(*v, "b")
	default:
		switch f.Kind() {
		case reflect.String:
			f.SetString(f.String() + "x")
		case reflect.Bool:
			f.SetBool(!f.Bool())
		case reflect.Int, reflect.Int32, reflect.Int64:
			f.SetInt(f.Int() + 1)
		case reflect.Uint32:
			f.SetUint(f.Uint() + 1)
		default:
			t.Fatalf("field %s of kind %s: teach this test to change it", name, f.Kind())
		}
	}
}

// Reusing the previous record's bytes stores the same bytes as encoding
// afresh, and a changed lock is encoded again.
func TestEncodeLocksReusesUnchanged(t *testing.T) {
	locks := []model.Lock{{PID: 1, Granted: true}, {PID: 2, WaitStart: time.Unix(5, 0)}}
	first, err := encodeLocks(locks, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	next := []model.Lock{locks[0], {PID: 2, Granted: true}}
	got, err := encodeLocks(next, locks, first)
	if err != nil {
		t.Fatal(err)
	}
	fresh, _ := encodeLocks(next, nil, nil)
	if !reflect.DeepEqual(got, fresh) || got[0] != first[0] || got[1] == first[1] {
		t.Errorf("got %q, want %q (first %q)", got, fresh, first)
	}
}
