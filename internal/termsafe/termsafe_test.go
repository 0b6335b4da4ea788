package termsafe_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/locktop/locktop/internal/termsafe"
)

func TestEscapeJSON(t *testing.T) {
	in := map[string]string{"q": "a\u009b2J b\u202e c\u2066 d\u007f e\u200f f\u061c ok é 日本 \n", "plain": "x"}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	out := termsafe.EscapeJSON(b)
	for _, r := range string(out) {
		if termsafe.Control(r) {
			t.Errorf("U+%04X left raw in %s", r, out)
		}
	}
	if !strings.Contains(string(out), "é 日本") {
		t.Errorf("printable text changed: %s", out)
	}
	var back map[string]string
	if err := json.Unmarshal(out, &back); err != nil || back["q"] != in["q"] || back["plain"] != "x" {
		t.Errorf("round trip: %q, %v", back, err)
	}
	plain := []byte(`{"a":"b"}`)
	if got := termsafe.EscapeJSON(plain); &got[0] != &plain[0] {
		t.Error("plain ASCII was copied")
	}
}
