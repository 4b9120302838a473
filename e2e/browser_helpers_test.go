package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/l4lb/l4lb/internal/testnet"
)

// A headless chromium (Debian's chromium package) driven over the
// DevTools protocol: the status page's tests load it in a real browser,
// read what it rendered and ask it to fetch from the page's origin. The
// protocol, rather than --dump-dom, because the page renders after its
// first fetch and changes as backends trip: the tests must poll the live
// DOM, evaluate fetches in the page's origin and read timings it records.

// browser is one chromium process and a DevTools connection to its page.
type browser struct {
	cmd  *exec.Cmd
	done chan struct{}
	ws   *websocket.Conn
	next int
}

// chromiumPath finds chromium, by the tools policy (testnet.NeedTool),
// and also fails when CI is set: CI must run the browser tests.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := testnet.ToolPath("chromium"); p != "" {
		return p
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium not installed, and CI is set: the status page's browser tests must run (apt-get install chromium; .ci/run does)")
	}
	return testnet.NeedTool(t, "chromium", "chromium")
}

// startBrowser starts headless chromium with an empty profile of its own,
// a window of width x height, and connects to its page; both end with the
// test.
func startBrowser(t *testing.T, width, height int) *browser {
	t.Helper()
	bin := chromiumPath(t)
	profile := t.TempDir()
	// The flags keep it off the network (no updates, sync or field
	// trials to fetch) and runnable as root in a container.
	cmd := exec.Command(bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-default-apps", "--disable-extensions", "--hide-scrollbars", "--force-device-scale-factor=1",
		"--user-data-dir="+profile, "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
		fmt.Sprintf("--window-size=%d,%d", width, height), "about:blank")
	// Its own process group, so the cleanup ends its helpers with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out := &testnet.LogBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	b := &browser{cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(b.done) }()
	t.Cleanup(func() {
		if b.ws != nil {
			b.ws.CloseNow()
		}
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-b.done
		if t.Failed() {
			t.Logf("chromium output:\n%s", out.String())
		}
	})
	// Chromium writes the port it took into the profile.
	var port string
	testnet.Eventually(t, "chromium's DevTools port", func() bool {
		data, err := os.ReadFile(filepath.Join(profile, "DevToolsActivePort"))
		port, _, _ = strings.Cut(string(data), "\n")
		return err == nil && port != ""
	})
	var pageWS string
	testnet.Eventually(t, "chromium's page target", func() bool {
		pageWS = pageTarget("http://127.0.0.1:" + port + "/json/list")
		return pageWS != ""
	})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, pageWS, nil)
	if err != nil {
		t.Fatalf("DevTools websocket %s: %v", pageWS, err)
	}
	ws.SetReadLimit(64 << 20) // screenshots
	b.ws = ws
	return b
}

// pageTarget is the DevTools websocket of the first page chromium lists
// at url; "" when none is up yet.
func pageTarget(url string) string {
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(url)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var targets []struct{ Type, WebSocketDebuggerURL string }
	if json.NewDecoder(resp.Body).Decode(&targets) != nil {
		return ""
	}
	for _, tg := range targets {
		if tg.Type == "page" {
			return tg.WebSocketDebuggerURL
		}
	}
	return ""
}

// call sends one DevTools command and returns its result, skipping the
// events that come before it.
func (b *browser) call(t *testing.T, method string, params any) json.RawMessage {
	t.Helper()
	res, err := b.try(method, params)
	if err != nil {
		t.Fatalf("DevTools %s: %v", method, err)
	}
	return res
}

func (b *browser) try(method string, params any) (json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b.next++
	msg, _ := json.Marshal(map[string]any{"id": b.next, "method": method, "params": params})
	if err := b.ws.Write(ctx, websocket.MessageText, msg); err != nil {
		return nil, err
	}
	for {
		_, data, err := b.ws.Read(ctx)
		if err != nil {
			return nil, err
		}
		var reply struct {
			ID     int
			Result json.RawMessage
			Error  *struct{ Message string }
		}
		if err := json.Unmarshal(data, &reply); err != nil {
			return nil, err
		}
		if reply.ID != b.next {
			continue // an event, or nothing we wait for
		}
		if reply.Error != nil {
			return nil, errors.New(reply.Error.Message)
		}
		return reply.Result, nil
	}
}

// navigate loads url in the page.
func (b *browser) navigate(t *testing.T, url string) {
	t.Helper()
	b.call(t, "Page.navigate", map[string]any{"url": url})
}

// eval evaluates expr in the page (awaiting a promise) and decodes its
// JSON value into out.
func (b *browser) eval(t *testing.T, expr string, out any) {
	t.Helper()
	if err := b.tryEval(expr, out); err != nil {
		t.Fatal(err)
	}
}

// tryEval is eval returning its error (while a page loads, its context
// may go away under an evaluation).
func (b *browser) tryEval(expr string, out any) error {
	raw, err := b.try("Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true})
	if err != nil {
		return fmt.Errorf("evaluate %s: %w", expr, err)
	}
	var r struct {
		Result           struct{ Value json.RawMessage }
		ExceptionDetails *struct {
			Text      string
			Exception struct{ Description string }
		}
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return fmt.Errorf("evaluate %s: %w", expr, err)
	}
	if r.ExceptionDetails != nil {
		return fmt.Errorf("evaluate %s: %s %s", expr, r.ExceptionDetails.Text, r.ExceptionDetails.Exception.Description)
	}
	if err := json.Unmarshal(r.Result.Value, out); err != nil {
		return fmt.Errorf("evaluate %s: value %s: %w", expr, r.Result.Value, err)
	}
	return nil
}

// screenshot writes the whole page (not only the window) as a PNG to
// path.
func (b *browser) screenshot(t *testing.T, path string) {
	t.Helper()
	var m struct {
		CSSContentSize struct{ Width, Height float64 }
	}
	if err := json.Unmarshal(b.call(t, "Page.getLayoutMetrics", nil), &m); err != nil {
		t.Fatal(err)
	}
	clip := map[string]any{"x": 0, "y": 0, "width": m.CSSContentSize.Width, "height": m.CSSContentSize.Height, "scale": 1}
	var r struct{ Data string }
	if err := json.Unmarshal(b.call(t, "Page.captureScreenshot", map[string]any{"format": "png", "clip": clip, "captureBeyondViewport": true}), &r); err != nil {
		t.Fatal(err)
	}
	png, err := base64.StdEncoding.DecodeString(r.Data)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
}
