// Package headless gives tests a headless Chromium (Debian's chromium
// package, which make deps installs) driven over the DevTools protocol with
// chromedp: open a page, evaluate JavaScript in it, take a screenshot, and
// collect every error and warning the page reports (console, uncaught
// exceptions, the browser's log, where Content-Security-Policy violations
// are told). It runs headless (CI has no display) and without the sandbox
// (Chromium refuses to start as root with it). A test that needs Chromium
// and cannot find it fails saying how to install it: it never skips.
package headless

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// Browser is a headless Chromium (Debian's chromium package) driven over
// the DevTools protocol, and the errors its pages report.
type Browser struct {
	// Ctx runs chromedp actions on the browser's tab.
	Ctx  context.Context
	mu   sync.Mutex
	errs []string
}

// chromiumPath finds Chromium, or fails the test saying how to install it:
// a test never skips.
func chromiumPath(t testing.TB) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("chromium is not installed: `make deps` installs it (apt-get update && apt-get install -y chromium)")
	return ""
}

// New starts Chromium for the test: headless (CI has no display),
// without the sandbox (it refuses to start as root with it).
func New(t testing.TB) *Browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)), chromedp.NoSandbox, chromedp.Headless, chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1400, 1000))
	b := &Browser{}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx, chromedp.WithListener(b.listen))
	ctx, cancelTimeout := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancelCtx(); cancelAlloc() })
	b.Ctx = ctx
	if _, err := chromedp.Call(ctx, cdplog.Enable, cdp.Empty{}); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	return b
}

// listen keeps what the page reports as an error or a warning: console
// messages, uncaught exceptions, and the browser's log (where a blocked
// script or image, a Content-Security-Policy violation, is told).
func (b *Browser) listen(ev any) {
	switch ev := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeWarning {
			var args []string
			for _, a := range ev.Args {
				args = append(args, string(a.Value)+a.Description)
			}
			b.add("console." + string(ev.Type) + ": " + strings.Join(args, " "))
		}
	case *runtime.EventExceptionThrown:
		b.add("exception: " + ev.ExceptionDetails.Text)
	case *cdplog.EventEntryAdded:
		if ev.Entry.Level == cdplog.EntryLevelError || ev.Entry.Level == cdplog.EntryLevelWarning {
			b.add(fmt.Sprintf("log %s (%s): %s", ev.Entry.Level, ev.Entry.Source, ev.Entry.Text))
		}
	}
}

func (b *Browser) add(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.errs = append(b.errs, s)
}

// Errors are what the pages reported so far.
func (b *Browser) Errors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.errs...)
}

// Open writes page to a file under dir and loads it; it returns how long
// the page took from the start of navigation to its first frame after
// load, as the page's own clock measured it.
func (b *Browser) Open(t testing.TB, dir, name string, page []byte) time.Duration {
	t.Helper()
	path := dir + "/" + name
	if err := os.WriteFile(path, page, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(b.Ctx, chromedp.Navigate("file://"+path)); err != nil {
		t.Fatalf("loading %s: %v", path, err)
	}
	ms, err := chromedp.Run(b.Ctx, chromedp.Evaluate[float64](`new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(performance.now()))))`,
		chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("loading %s: %v", path, err)
	}
	return time.Duration(ms * float64(time.Millisecond))
}

// Eval evaluates a JavaScript expression in the page (the DevTools
// protocol's evaluation, which the page's Content-Security-Policy does not
// govern).
func Eval[T any](t testing.TB, b *Browser, expr string) T {
	t.Helper()
	v, err := chromedp.Run(b.Ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// Screenshot saves a full-page PNG of the tab to path.
func (b *Browser) Screenshot(t testing.TB, path string) {
	t.Helper()
	png, err := chromedp.Run(b.Ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
}
