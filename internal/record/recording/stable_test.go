package recording

import (
	"reflect"
	"testing"
	"time"

	"github.com/locktop/locktop/model"
)

// sameLock must see a change in every field of model.Lock: one it missed
// would store a changed lock with its old bytes.
func TestSameLockSeesEveryField(t *testing.T) {
	base := model.Lock{Kind: model.KindAdvisory, PID: 7, QueryStart: time.Unix(100, 0), BlockedBy: []int32{1}, BlockedByOwners: []string{"a"}}
	if !sameLock(&base, &base) {
		t.Fatal("a lock differs from itself")
	}
	typ := reflect.TypeOf(base)
	for i := range typ.NumField() {
		other := base
		other.BlockedBy, other.BlockedByOwners = []int32{1}, []string{"a"} // equal, not shared
		f := reflect.ValueOf(&other).Elem().Field(i)
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
				t.Fatalf("field %s of kind %s: teach this test to change it", typ.Field(i).Name, f.Kind())
			}
		}
		if sameLock(&base, &other) {
			t.Errorf("sameLock misses a change of %s", typ.Field(i).Name)
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
