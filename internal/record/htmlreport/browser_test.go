package htmlreport

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

// browser is a headless Chromium (Debian's chromium package) driven over
// the DevTools protocol, and the errors its pages report.
type browser struct {
	ctx  context.Context
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

// newBrowser starts Chromium for the test: headless (CI has no display),
// without the sandbox (it refuses to start as root with it).
func newBrowser(t testing.TB) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)), chromedp.NoSandbox, chromedp.Headless, chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1400, 1000))
	b := &browser{}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx, chromedp.WithListener(b.listen))
	ctx, cancelTimeout := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancelCtx(); cancelAlloc() })
	b.ctx = ctx
	if _, err := chromedp.Call(ctx, cdplog.Enable, cdp.Empty{}); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	return b
}

// listen keeps what the page reports as an error or a warning: console
// messages, uncaught exceptions, and the browser's log (where a blocked
// script or image, a Content-Security-Policy violation, is told).
func (b *browser) listen(ev any) {
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

func (b *browser) add(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.errs = append(b.errs, s)
}

// errors are what the pages reported so far.
func (b *browser) errors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.errs...)
}

// open writes page to a file under dir and loads it; it returns how long
// the page took from the start of navigation to its first frame after
// load, as the page's own clock measured it.
func (b *browser) open(t testing.TB, dir, name string, page []byte) time.Duration {
	t.Helper()
	path := dir + "/" + name
	if err := os.WriteFile(path, page, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(b.ctx, chromedp.Navigate("file://"+path)); err != nil {
		t.Fatalf("loading %s: %v", path, err)
	}
	ms, err := chromedp.Run(b.ctx, chromedp.Evaluate[float64](`new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(performance.now()))))`,
		chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("loading %s: %v", path, err)
	}
	return time.Duration(ms * float64(time.Millisecond))
}

// eval evaluates a JavaScript expression in the page (the DevTools
// protocol's evaluation, which the page's Content-Security-Policy does not
// govern).
func eval[T any](t testing.TB, b *browser, expr string) T {
	t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}
