package ui

import (
	"strconv"

	"charm.land/bubbles/v2/viewport"
	tea "charm.land/bubbletea/v2"
)

// scrollBox is a bordered box with a title line and content that scrolls:
// the body of the help and of the details overlays. The content is
// rendered for the box's inner width (wrapped between words by whoever
// renders it), again whenever the size changes.
type scrollBox struct {
	st     *Styles
	title  string
	render func(width int) string
	vp     viewport.Model
	w, h   int
}

func newScrollBox(st *Styles, k *KeyMap) scrollBox {
	vp := viewport.New()
	vp.SoftWrap = true // a safety net: the content comes wrapped already
	vp.KeyMap.Up, vp.KeyMap.Down = k.Up, k.Down
	vp.KeyMap.PageUp, vp.KeyMap.PageDown = k.PageUp, k.PageDown
	vp.KeyMap.HalfPageUp.SetEnabled(false)
	vp.KeyMap.HalfPageDown.SetEnabled(false)
	vp.KeyMap.Left.SetEnabled(false)
	vp.KeyMap.Right.SetEnabled(false)
	return scrollBox{st: st, vp: vp}
}

// inner is the width of the content: the border and the padding off.
func (b *scrollBox) inner() int { return max(b.w-4, 10) }

// SetSize sets the box's outer size and renders the content for it.
func (b *scrollBox) SetSize(w, h int) {
	if w == b.w && h == b.h {
		return
	}
	b.w, b.h = w, h
	b.vp.SetWidth(b.inner())
	b.vp.SetHeight(max(h-3, 1)) // the border and the title
	b.refill()
}

// set gives the box a title and its content, from the top.
func (b *scrollBox) set(title string, render func(width int) string) {
	b.title, b.render = title, render
	b.refill()
	b.vp.GotoTop()
}

func (b *scrollBox) refill() {
	if b.render != nil && b.w > 0 {
		b.vp.SetContent(b.render(b.inner()))
	}
}

// Update scrolls.
func (b *scrollBox) Update(msg tea.Msg) tea.Cmd {
	var cmd tea.Cmd
	b.vp, cmd = b.vp.Update(msg)
	return cmd
}

// View renders the box in exactly its size. The title line says which
// lines show when the content is longer than the box.
func (b *scrollBox) View() string {
	title := b.st.Section.Render(b.title)
	if n := b.vp.TotalLineCount(); n > b.vp.Height() {
		from := b.vp.YOffset() + 1
		to := min(b.vp.YOffset()+b.vp.Height(), n)
		pos := b.st.Dim.Render("lines " + strconv.Itoa(from) + "–" + strconv.Itoa(to) + " of " + strconv.Itoa(n))
		if gap := b.inner() - width(title) - width(pos); gap >= 2 {
			title += spaces(gap) + pos
		}
	}
	body := fitLine(title, b.inner()) + "\n" + b.vp.View()
	return b.st.Box.Width(b.w).Height(b.h).MaxHeight(b.h).Render(body)
}
