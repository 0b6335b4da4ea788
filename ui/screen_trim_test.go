package ui

import (
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"
	uv "github.com/charmbracelet/ultraviolet"
)

// The frame Bubble Tea gets, trimmed, draws the same cells as the padded
// one: on a blank screen, as the renderer draws each frame, for a table
// with a reversed selection and with the help over it.
func TestScreenTrimDrawsTheSame(t *testing.T) {
	h := newHarness(t, Options{})
	h.send(tea.WindowSizeMsg{Width: 160, Height: 50})
	h.send(SnapshotMsg{Snapshot: bigSnapshot(12)})
	for _, k := range []string{"", "?"} {
		if k != "" {
			h.send(press(k))
		}
		frame := h.m.View().Content
		trim := trimLines(frame)
		if k == "" && len(trim) >= len(frame) { // with an overlay, lines may end in a style
			t.Fatalf("nothing trimmed (%d bytes)", len(frame))
		}
		draw := func(s string) string {
			buf := uv.NewScreenBuffer(160, 50)
			uv.NewStyledString(s).Draw(buf, buf.Bounds())
			return buf.Render()
		}
		if a, b := draw(frame), draw(trim); a != b {
			t.Errorf("key %q: the trimmed frame draws otherwise:\n%s\n---\n%s", k, a, b)
		}
		if !strings.Contains(trim, "\x1b[") {
			t.Errorf("key %q: no styles in the frame: the test draws nothing styled", k)
		}
	}
}

func TestTrimLines(t *testing.T) {
	for in, want := range map[string]string{
		"":                        "",
		"a  \nb\n   ":             "a\nb\n",
		"\x1b[7m sel  \x1b[m  ":   "\x1b[7m sel  \x1b[m",
		"x\x1b[1m  \x1b[m":        "x\x1b[1m  \x1b[m",
		"  lead":                  "  lead",
		"one\n\ntwo  \n  three  ": "one\n\ntwo\n  three",
	} {
		if got := trimLines(in); got != want {
			t.Errorf("trimLines(%q) = %q, want %q", in, got, want)
		}
	}
}
