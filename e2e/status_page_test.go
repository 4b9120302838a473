package e2e

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
)

// statusScreenshot, when set, makes TestStatusPageScreenshot write the
// README's picture there: go test ./e2e -run StatusPageScreenshot
// -status-screenshot=$PWD/docs/status.png
var statusScreenshot = flag.String("status-screenshot", "", "write a screenshot of the status page to this PNG file")

// pageRow is one backend row as the status page rendered it.
type pageRow struct {
	Pool, Backend, Class, Health, Breaker, Gen, State, DialFail, Check string
}

// pageView is what the status page shows: its counters (window.l4lbStatus)
// and every pool's title and backend rows.
type pageView struct {
	Renders int
	Error   string
	Ms      float64 // the last render's, layout included
	FetchMs float64 // the last GET /api/v1/pools, its JSON decoded
	Titles  []string
	Rows    []pageRow
}

const readPage = `window.l4lbStatus ? {
  renders: l4lbStatus.renders, error: l4lbStatus.error, ms: l4lbStatus.lastRenderMs, fetchMs: l4lbStatus.lastFetchMs,
  titles: [...document.querySelectorAll("section[data-pool] h2")].map(h => h.textContent),
  rows: [...document.querySelectorAll("tr[data-backend]")].map(r => {
    const c = n => r.querySelector("td." + n).textContent;
    return {pool: r.dataset.pool, backend: r.dataset.backend, class: r.className, health: c("health"),
      breaker: c("breaker"), gen: c("gen"), state: c("state"), dialfail: c("dialfail"),
      check: c("check")};
  })} : null`

// row is the row of backend addr; false if the page has none.
func (v *pageView) row(addr string) (pageRow, bool) {
	for _, r := range v.Rows {
		if r.Backend == addr {
			return r, true
		}
	}
	return pageRow{}, false
}

// waitPage polls the rendered page until cond holds of it, failing with
// the last view after a generous deadline (the page refreshes every 2s).
func (b *browser) waitPage(t *testing.T, what string, cond func(*pageView) bool) *pageView {
	t.Helper()
	var v *pageView
	var err error
	if !testnet.WaitUntil(60*time.Second, func() bool {
		v = nil
		err = b.tryEval(readPage, &v)
		return err == nil && v != nil && v.Error == "" && cond(v)
	}) {
		t.Fatalf("timed out waiting for the status page to show %s; last view %+v, error %v", what, v, err)
	}
	return v
}

// statusConfig writes a file of pools (name: backend addresses), each
// behind a listener of its own named after it, with the breaker keys
// given and health checks off (the breaker alone judges), and returns its
// path, the listeners' and the admin address.
func statusConfig(t *testing.T, pools [][2]any, poolKeys string) (path string, listens map[string]string, adminAddr string) {
	t.Helper()
	adminAddr, listens = testnet.FreeAddr(t), map[string]string{}
	var b strings.Builder
	fmt.Fprintf(&b, "[admin]\nlisten = %q\n", adminAddr)
	for _, p := range pools {
		name := p[0].(string)
		listens[name] = testnet.FreeAddr(t)
		fmt.Fprintf(&b, "[[listener]]\nname = %q\nbind = %q\npool = %q\n", name+"-in", listens[name], name)
	}
	for _, p := range pools {
		name := p[0].(string)
		fmt.Fprintf(&b, "[pool.%s]\nalgorithm = \"round-robin\"\n%s\n", name, strings.ReplaceAll(poolKeys, "POOL", name))
		for _, a := range p[1].([]string) {
			fmt.Fprintf(&b, "[[pool.%s.backend]]\naddr = %q\n", name, a)
		}
	}
	path = filepath.Join(t.TempDir(), "l4lb.toml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, listens, adminAddr
}

// openStatusPage starts l4lb over pools (as statusConfig writes them) and
// a browser of a window width x height on its status page.
func openStatusPage(t *testing.T, pools [][2]any, poolKeys string, width, height int) (listens map[string]string, adminAddr string, br *browser) {
	t.Helper()
	path, listens, adminAddr := statusConfig(t, pools, poolKeys)
	l := startL4LB(t, "", nil, "-config", path)
	for _, a := range listens {
		waitServing(t, l, a)
	}
	waitAccepting(t, "l4lb admin", l, adminAddr)
	br = startBrowser(t, width, height)
	br.navigate(t, "http://"+adminAddr+"/")
	return listens, adminAddr, br
}

// A quick breaker: three failed client dials trip it, and it probes again
// within a second.
const quickBreaker = "[pool.POOL.health]\nenabled = false\n[pool.POOL.breaker]\nfailures = 3\ncooldown = \"200ms\"\nmax_cooldown = \"1s\"\n"

// dialSome makes n client connections to listen (some fail over to the
// next backend; their failed dials are what trips a closed backend).
func dialSome(listen string, n int) {
	for range n {
		testnet.Hello(listen, "")
	}
}

// The status page in a real browser, against the real binary: it renders
// every backend of the pool; a backend whose port closes shows its
// breaker open once client dials fail, and closed again once it is back;
// its own fetch (a same-origin GET, which Chrome sends without Origin)
// passes the admin endpoint's browser guard, while a POST from the page's
// origin is refused by it.
func TestStatusPageInBrowser(t *testing.T) {
	testnet.CheckLeaks(t)
	bs := []*testnet.Backend{testnet.StartBackend(t, "b0", ""), testnet.StartBackend(t, "b1", ""), testnet.StartBackend(t, "b2", "")}
	addrs := []string{bs[0].Addr, bs[1].Addr, bs[2].Addr}
	listens, adminAddr, br := openStatusPage(t, [][2]any{{"web", addrs}}, quickBreaker, 1280, 800)
	v := br.waitPage(t, "the pool's three backends", func(v *pageView) bool { return len(v.Rows) == 3 })
	if len(v.Titles) != 1 || !strings.Contains(v.Titles[0], "pool web") || !strings.Contains(v.Titles[0], "listeners: web-in") {
		t.Errorf("pool titles %q: want pool web, taken by listener web-in", v.Titles)
	}
	for _, a := range addrs {
		if r, ok := v.row(a); !ok || r.Pool != "web" || r.Health != "up" || r.Breaker != "closed" || r.State != "in rotation" || r.Class != "" {
			t.Errorf("backend %s: row %+v, want web, up, closed, in rotation", a, r)
		}
	}

	tripped := bs[1].Addr
	bs[1].Close()
	v = br.waitPage(t, "the closed backend's breaker open", func(v *pageView) bool {
		dialSome(listens["web"], 6)
		r, _ := v.row(tripped)
		return r.Breaker == "open" && r.Class == "open"
	})
	if r, _ := v.row(tripped); r.DialFail == "0" || r.Gen == "0" {
		t.Errorf("tripped backend's row %+v: want dial failures and a new generation", r)
	}
	if r, _ := v.row(bs[0].Addr); r.Breaker != "closed" {
		t.Errorf("a live backend's row %+v while another is tripped", r)
	}

	testnet.StartBackend(t, "b1", tripped)
	br.waitPage(t, "the backend back, its breaker closed", func(v *pageView) bool {
		r, _ := v.row(tripped)
		return r.Breaker == "closed" && r.Class == "" && r.State == "in rotation"
	})

	// Its inline style and script ran under its CSP (the script did, or
	// nothing would have rendered).
	var thBackground string
	br.eval(t, `getComputedStyle(document.querySelector("th")).backgroundColor`, &thBackground)
	if thBackground != "rgb(238, 238, 238)" {
		t.Errorf("a heading's background %q: the page's style did not apply (blocked by its CSP?)", thBackground)
	}
	// A same-origin GET carries no Origin (the guard would refuse it)...
	var get int
	br.eval(t, `fetch("/api/v1/pools").then(r => r.status)`, &get)
	if get != http.StatusOK {
		t.Errorf("GET /api/v1/pools from the page: %d, want 200", get)
	}
	// ...while a POST does, so the page's origin cannot act.
	var post struct {
		Status int
		Body   string
	}
	br.eval(t, `fetch("/api/v1/pools/web/backends/`+url.PathEscape(bs[0].Addr)+`/disable", {method: "POST"}).then(r => r.text().then(body => ({status: r.status, body})))`, &post)
	if post.Status != http.StatusForbidden || !strings.Contains(post.Body, "Origin") {
		t.Errorf("POST from the page: %d %s; want 403 naming the Origin header", post.Status, post.Body)
	}
	if backends(t, adminAddr, "web")[bs[0].Addr].Disabled {
		t.Error("the refused POST disabled the backend")
	}
}

// Text a backend controls reaches the page as text: a backend whose reply
// to the health check is markup shows it, quoted in the check's error,
// and no element of it is made.
func TestStatusPageShowsBackendTextAsText(t *testing.T) {
	testnet.CheckLeaks(t)
	// No quotes: the error quotes the reply (Go's %q) and would escape them.
	const markup = `<img src=x id=pwn onerror=window.pwned=1>`
	b := testnet.StartBackend(t, markup, "")
	_, _, br := openStatusPage(t, [][2]any{{"web", []string{b.Addr}}},
		"[pool.POOL.health]\ntype = \"send-expect\"\nsend = \"PING\\n\"\nexpect = \"PONG, a reply longer than the tag, all of which the check reads\"\ninterval = \"200ms\"\ntimeout = \"200ms\"\n", 1280, 800)
	// The error shows from the first failed check; health goes down only
	// after [pool.health] fall of them.
	br.waitPage(t, "the failed check's error, the backend down", func(v *pageView) bool {
		r, _ := v.row(b.Addr)
		return strings.Contains(r.Check, markup) && r.Health == "down"
	})
	var made struct {
		Images int
		Pwned  bool
	}
	br.eval(t, `({images: document.querySelectorAll("img").length, pwned: !!window.pwned})`, &made)
	if made.Images != 0 || made.Pwned {
		t.Fatalf("the backend's reply became markup: %d img elements, handler ran %v", made.Images, made.Pwned)
	}
}

// The page at 1,000 backends (5 pools of 200, none reachable, no
// traffic): every backend rendered; the time of its first render (rows
// built) and of a later one (rows updated in place), measured in the page
// with performance.now(), logged for docs/steering.md.
func TestStatusPage1000Backends(t *testing.T) {
	testnet.CheckLeaks(t)
	var pools [][2]any
	for p := range 5 {
		var addrs []string
		for i := range 200 {
			addrs = append(addrs, fmt.Sprintf("127.0.%d.%d:9", 2+p, 1+i))
		}
		pools = append(pools, [2]any{fmt.Sprintf("p%d", p), addrs})
	}
	_, _, br := openStatusPage(t, pools, "[pool.POOL.health]\nenabled = false\n", 1280, 800)
	first := br.waitPage(t, "1,000 backends", func(v *pageView) bool { return len(v.Rows) == 1000 })
	if first.Renders != 1 {
		t.Logf("the first view seen is of render %d", first.Renders)
	}
	// The second render changes two cells of every row (the rates, from
	// "–" to a figure); the later ones find nothing to change.
	second := br.waitPage(t, "a refresh", func(v *pageView) bool { return v.Renders >= 2 })
	later := br.waitPage(t, "three more refreshes", func(v *pageView) bool { return v.Renders >= first.Renders+3 })
	if len(later.Rows) != 1000 || len(later.Titles) != 5 {
		t.Fatalf("after refreshes: %d rows in %d pools, want 1000 in 5", len(later.Rows), len(later.Titles))
	}
	t.Logf("at 1,000 backends: first render %.1f ms (render %d), every row changed %.1f ms (render %d), a refresh's render %.1f ms and fetch with JSON decode %.1f ms (render %d)",
		first.Ms, first.Renders, second.Ms, second.Renders, later.Ms, later.FetchMs, later.Renders)
}

// startEchoLoad connects clients to listen one after another until the
// test ends (at most 5,000, a few ms apart), each sending size bytes and
// reading them back, so the page has rates to show.
func startEchoLoad(t *testing.T, listen string, size int) {
	stop, done := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(stop); <-done })
	go func() {
		defer close(done)
		msg := make([]byte, size)
		for range 5000 {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			c, err := net.DialTimeout("tcp", listen, time.Second)
			if err != nil {
				continue
			}
			c.SetDeadline(time.Now().Add(5 * time.Second))
			r := bufio.NewReader(c)
			if _, err := r.ReadString('\n'); err == nil {
				go c.Write(msg) // the echo comes back while it writes
				io.ReadFull(r, make([]byte, size))
			}
			c.Close()
		}
	}()
}

// Writes the README's screenshot when -status-screenshot names a file: a
// few pools under traffic, one backend's port closed (its breaker open, its
// health checks failing), one draining.
func TestStatusPageScreenshot(t *testing.T) {
	if *statusScreenshot == "" {
		t.Skip("no -status-screenshot file given")
	}
	testnet.CheckLeaks(t)
	web := []*testnet.Backend{testnet.StartBackend(t, "w0", ""), testnet.StartBackend(t, "w1", ""), testnet.StartBackend(t, "w2", ""), testnet.StartBackend(t, "w3", "")}
	api := []*testnet.Backend{testnet.StartBackend(t, "a0", ""), testnet.StartBackend(t, "a1", "")}
	cache := []*testnet.Backend{testnet.StartBackend(t, "c0", ""), testnet.StartBackend(t, "c1", ""), testnet.StartBackend(t, "c2", "")}
	addrs := func(bs []*testnet.Backend) (out []string) {
		for _, b := range bs {
			out = append(out, b.Addr)
		}
		return out
	}
	listens, adminAddr, br := openStatusPage(t, [][2]any{{"web", addrs(web)}, {"api", addrs(api)}, {"cache", addrs(cache)}},
		"[pool.POOL.health]\ninterval = \"1s\"\n[pool.POOL.breaker]\nfailures = 3\ncooldown = \"5s\"\nmax_cooldown = \"30s\"\n", 1500, 400)
	for name, a := range listens {
		startEchoLoad(t, a, map[string]int{"web": 64 << 10, "api": 8 << 10, "cache": 200 << 10}[name])
	}
	tripped, drained := web[2].Addr, web[3].Addr
	web[2].Close()
	if code := post(t, "http://"+adminAddr+"/api/v1/pools/web/backends/"+url.PathEscape(drained)+"/drain?timeout=10m", ""); code != http.StatusAccepted {
		t.Fatalf("drain: %d", code)
	}
	br.waitPage(t, "one backend tripped, one draining, rates read", func(v *pageView) bool {
		tr, _ := v.row(tripped)
		dr, _ := v.row(drained)
		return v.Renders >= 3 && tr.Breaker == "open" && tr.Health == "down" && dr.Class == "draining"
	})
	br.screenshot(t, *statusScreenshot)
}
