package ui

import (
	"testing"

	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"
)

// width must count as ansi.StringWidth does: every rune it counts alone
// (narrow), and styled lines mixing them with ASCII, wide and combining
// characters and escapes of every sort.
func TestWidthMatchesAnsi(t *testing.T) {
	for r := rune(0x80); r < 0x3000; r++ {
		if narrow(r) {
			if got := ansi.StringWidth(string(r)); got != 1 {
				t.Errorf("narrow(%U) but ansi.StringWidth says %d cells", r, got)
			}
		}
	}
	st := lipgloss.NewStyle().Foreground(lipgloss.Color("#ff8800")).Bold(true).Reverse(true)
	for _, s := range []string{
		"", "plain", "a · b … c ≥1m16s", "▁▂▃▄▅▆▇█", "── Locks ───", "› 4242 holds", "é and e\u0301",
		"wide 漢字 here", "emoji ⌚ ☔ 👍🏽", "flag 🇫🇷", "zwj a\u200db", "tab\tand\nnewline", "\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\",
		"\x1b[", "\x1b[31", "\x1b[31m", "half \x1bX", "soft\u00adhyphen", "nbsp\u00a0x", "\x7f del",
		st.Render("styled · ≥ ─"), st.Render("漢字") + " · " + st.Render("ok"), "\u2028 line sep", "\u2060 joiner",
	} {
		if got, want := width(s), ansi.StringWidth(s); got != want {
			t.Errorf("width(%q) = %d, ansi.StringWidth = %d", s, got, want)
		}
	}
}
