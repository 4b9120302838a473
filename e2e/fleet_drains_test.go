package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
)

// Drains and runtime weights made through one instance's admin API hold
// on every instance of the fleet (issue 31), unless the operator makes
// them the instance's own (scope=local); both survive a Redis restart
// with no data.

// fleetBackendJSON is one backend of pool p as an instance's API shows it.
type fleetBackendJSON struct {
	Addr        string `json:"addr"`
	Weight      int    `json:"weight"`
	WeightScope string `json:"weight_scope"`
	Draining    bool   `json:"draining"`
	Drain       *struct {
		Scope string `json:"scope"`
	} `json:"drain"`
}

func fleetBackend(t *testing.T, in *fleetInstance, addr string) fleetBackendJSON {
	t.Helper()
	code, body := fleetAPI(t, "GET", in.admin, "/api/v1/pools/p", "")
	if code != http.StatusOK {
		t.Fatalf("GET pool p on %s: %d %s", in.name, code, body)
	}
	var p struct {
		Backends []fleetBackendJSON `json:"backends"`
	}
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Fatal(err)
	}
	for _, b := range p.Backends {
		if b.Addr == addr {
			return b
		}
	}
	t.Fatalf("instance %s has no backend %s", in.name, addr)
	return fleetBackendJSON{}
}

// drainScope is where the backend's drain comes from on in ("" when not
// draining).
func drainScope(t *testing.T, in *fleetInstance, addr string) string {
	b := fleetBackend(t, in, addr)
	if !b.Draining || b.Drain == nil {
		return ""
	}
	return b.Drain.Scope
}

// tagsThrough opens n connections one after another through in and counts
// the backends' tags.
func tagsThrough(t *testing.T, in *fleetInstance, n int) map[string]int {
	t.Helper()
	got := map[string]int{}
	for range n {
		tag, err := testnet.Hello(in.listen, "")
		if err != nil {
			t.Fatalf("a client of %s: %v", in.name, err)
		}
		got[tag]++
	}
	return got
}

// heldConn is a client connection kept open through an instance.
type heldConn struct {
	c   net.Conn
	r   *bufio.Reader
	tag string
}

// holdTo opens connections through in until one reaches the backend
// tagged tag (round robin: within a few), closing the others.
func holdTo(t *testing.T, in *fleetInstance, tag string) *heldConn {
	t.Helper()
	for range 20 {
		c, err := net.DialTimeout("tcp", in.listen, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		r := bufio.NewReader(c)
		line, err := r.ReadString('\n')
		if err == nil && strings.TrimSpace(line) == tag {
			c.SetDeadline(time.Time{})
			t.Cleanup(func() { c.Close() })
			return &heldConn{c: c, r: r, tag: tag}
		}
		c.Close()
	}
	t.Fatalf("no connection through %s reached %s", in.name, tag)
	return nil
}

// echoes reports whether the connection still carries a line both ways.
func (h *heldConn) echoes() error {
	h.c.SetDeadline(time.Now().Add(10 * time.Second))
	defer h.c.SetDeadline(time.Time{})
	if _, err := io.WriteString(h.c, "ping\n"); err != nil {
		return err
	}
	line, err := h.r.ReadString('\n')
	if err == nil && line != "ping\n" {
		err = fmt.Errorf("echo %q", line)
	}
	return err
}

// cut waits (generously) for the connection to end, as the drain's
// deadline resets it.
func (h *heldConn) cut() error {
	h.c.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, err := h.r.ReadString('\n')
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return fmt.Errorf("still open 20s after the drain's deadline")
	}
	return nil
}

// startThreeOnThree starts a Redis, three backends tagged b1, b2, b3 and
// three instances NAME-a, -b, -c serving them in pool p (poolKeys added).
func startThreeOnThree(t *testing.T, name, poolKeys string) (*testnet.Redis, []*fleetInstance, []*testnet.Backend) {
	t.Helper()
	testnet.CheckLeaks(t)
	srv := testnet.StartRedis(t)
	var bs []*testnet.Backend
	var addrs []string
	for _, tag := range []string{"b1", "b2", "b3"} {
		b := testnet.StartBackend(t, tag, "")
		bs, addrs = append(bs, b), append(addrs, b.Addr)
	}
	dir := t.TempDir()
	var fleet []*fleetInstance
	for _, in := range []string{"-a", "-b", "-c"} {
		fleet = append(fleet, startFleetInstance(t, "", nil, dir, srv.URL(), name+in, addrs, poolKeys, ""))
	}
	return srv, fleet, bs
}

func TestFleetDrainHoldsOnEveryInstance(t *testing.T) {
	srv, fleet, bs := startThreeOnThree(t, "drain", "")
	a, b, c := fleet[0], fleet[1], fleet[2]
	b1, b2, b3 := bs[0], bs[1], bs[2]
	var held []*heldConn
	for _, in := range fleet {
		held = append(held, holdTo(t, in, "b1"))
	}

	// Drained through a: every instance takes b1 out for new clients;
	// the connections open to it go on until the deadline.
	if code, body := fleetAPI(t, "POST", a.admin, "/api/v1/pools/p/backends/"+b1.Addr+"/drain?timeout=1h", ""); code != http.StatusAccepted || !strings.Contains(body, `"scope":"fleet"`) {
		t.Fatalf("drain on a: %d %s", code, body)
	}
	for _, in := range fleet {
		testnet.Eventually(t, "instance "+in.name+" to hold the fleet's drain", func() bool { return drainScope(t, in, b1.Addr) == "fleet" })
		if got := tagsThrough(t, in, 12); got["b1"] != 0 || got["b2"]+got["b3"] != 12 {
			t.Fatalf("new clients of %s while b1 is drained: %v", in.name, got)
		}
	}
	for i, h := range held {
		if err := h.echoes(); err != nil {
			t.Fatalf("the connection to b1 through %s before the drain's deadline: %v", fleet[i].name, err)
		}
	}
	// Drained again with no time left: every instance resets what it
	// still has open to b1, as a local drain's deadline does.
	if code, body := fleetAPI(t, "POST", b.admin, "/api/v1/pools/p/backends/"+b1.Addr+"/drain?timeout=0s", ""); code != http.StatusAccepted {
		t.Fatalf("drain again on b: %d %s", code, body)
	}
	for i, h := range held {
		if err := h.cut(); err != nil {
			t.Fatalf("the connection to b1 through %s: %v", fleet[i].name, err)
		}
	}

	// Enabled through c: b1 is back everywhere.
	if code, body := fleetAPI(t, "POST", c.admin, "/api/v1/pools/p/backends/"+b1.Addr+"/enable", ""); code != http.StatusOK {
		t.Fatalf("enable on c: %d %s", code, body)
	}
	for _, in := range fleet {
		testnet.Eventually(t, "instance "+in.name+" to end the drain", func() bool { return drainScope(t, in, b1.Addr) == "" })
		if got := tagsThrough(t, in, 12); got["b1"] == 0 {
			t.Fatalf("new clients of %s after the enable: %v, none on b1", in.name, got)
		}
	}

	// The opt-out: drained on c alone, b1 still takes a's and b's clients.
	if code, body := fleetAPI(t, "POST", c.admin, "/api/v1/pools/p/backends/"+b1.Addr+"/drain?timeout=1h&scope=local", ""); code != http.StatusAccepted || !strings.Contains(body, `"scope":"local"`) {
		t.Fatalf("local drain on c: %d %s", code, body)
	}
	if got := tagsThrough(t, c, 12); got["b1"] != 0 {
		t.Fatalf("new clients of c while it drains b1 itself: %v", got)
	}
	// a and b were told nothing: give any stray change the time to
	// arrive (a fleet's drain arrives within milliseconds), then look.
	time.Sleep(time.Second)
	for _, in := range []*fleetInstance{a, b} {
		if s := drainScope(t, in, b1.Addr); s != "" {
			t.Fatalf("instance %s drains b1 (%s) after c's local drain", in.name, s)
		}
		if got := tagsThrough(t, in, 12); got["b1"] == 0 {
			t.Fatalf("new clients of %s after c's local drain: %v, none on b1", in.name, got)
		}
	}
	if v, err := srv.Do("GET", fleetKey(b1.Addr, "drain")); err != nil || !strings.Contains(v, " 0 0 0") {
		t.Fatalf("redis's drain record after a local drain: %q %v, want the undrain still", v, err)
	}
	// Its end, also c's alone: c takes b1 again, the fleet's record is
	// not written.
	record, _ := srv.Do("GET", fleetKey(b1.Addr, "drain"))
	if code, body := fleetAPI(t, "POST", c.admin, "/api/v1/pools/p/backends/"+b1.Addr+"/enable?scope=local", ""); code != http.StatusOK || !strings.Contains(body, `"draining":false`) {
		t.Fatalf("local enable on c: %d %s", code, body)
	}
	if got := tagsThrough(t, c, 12); got["b1"] == 0 {
		t.Fatalf("new clients of c after its local enable: %v, none on b1", got)
	}
	if v, err := srv.Do("GET", fleetKey(b1.Addr, "drain")); err != nil || v != record {
		t.Fatalf("redis's drain record after a local enable: %q %v, want it unwritten (%q)", v, err, record)
	}

	// The fleet's drain survives a Redis restart with no data: the
	// instances write it back, and a drain of b2 holds on, everywhere.
	if code, body := fleetAPI(t, "POST", a.admin, "/api/v1/pools/p/backends/"+b2.Addr+"/drain?timeout=1h", ""); code != http.StatusAccepted {
		t.Fatalf("drain b2 on a: %d %s", code, body)
	}
	for _, in := range fleet {
		testnet.Eventually(t, "instance "+in.name+" to drain b2", func() bool { return drainScope(t, in, b2.Addr) == "fleet" })
	}
	srv.Restart()
	testnet.Eventually(t, "redis to hold b2's drain again", func() bool {
		v, err := srv.Do("GET", fleetKey(b2.Addr, "drain"))
		return err == nil && strings.Contains(v, " 1 ")
	})
	for _, in := range fleet {
		in.waitMetric(t, "l4lb_cluster_store_up", "to rejoin", func(v float64) bool { return v == 1 })
		if s := drainScope(t, in, b2.Addr); s != "fleet" {
			t.Fatalf("instance %s after the restart: b2's drain %q, want the fleet's", in.name, s)
		}
		if got := tagsThrough(t, in, 12); got["b2"] != 0 {
			t.Fatalf("new clients of %s after the restart: %v, some on the drained b2", in.name, got)
		}
	}

	// Redis gone: a drain is kept by the instance asked and merged back
	// when Redis answers (empty, here); an enable and a fleet weight are
	// refused and made nowhere; scope=local still works.
	srv.Kill()
	for _, in := range fleet {
		in.waitMetric(t, "l4lb_cluster_store_up", "to see Redis gone", func(v float64) bool { return v == 0 })
	}
	if code, body := fleetAPI(t, "POST", a.admin, "/api/v1/pools/p/backends/"+b3.Addr+"/drain?timeout=1h", ""); code != http.StatusAccepted || !strings.Contains(body, `"scope":"fleet"`) {
		t.Fatalf("drain b3 on a with Redis down: %d %s", code, body)
	}
	if got := tagsThrough(t, a, 12); got["b3"] != 0 {
		t.Fatalf("new clients of a after its drain of b3 with Redis down: %v", got)
	}
	for _, q := range []string{b2.Addr + "/enable", b1.Addr + "/weight?value=3"} {
		if code, body := fleetAPI(t, "POST", b.admin, "/api/v1/pools/p/backends/"+q, ""); code != http.StatusServiceUnavailable {
			t.Fatalf("%s on b with Redis down: %d %s, want 503", q, code, body)
		}
	}
	if s := drainScope(t, b, b2.Addr); s != "fleet" {
		t.Fatalf("b's refused enable ended b2's drain there (%q)", s)
	}
	if code, body := fleetAPI(t, "POST", b.admin, "/api/v1/pools/p/backends/"+b1.Addr+"/weight?value=3&scope=local", ""); code != http.StatusOK {
		t.Fatalf("local weight on b with Redis down: %d %s", code, body)
	}
	srv.Restart()
	for _, in := range fleet {
		testnet.Eventually(t, "instance "+in.name+" to hold a's drain of b3, merged back", func() bool { return drainScope(t, in, b3.Addr) == "fleet" })
		if s := drainScope(t, in, b2.Addr); s != "fleet" {
			t.Fatalf("instance %s after the outage: b2's drain %q, want the fleet's", in.name, s)
		}
	}
}

// A weight set through one instance changes the share of new clients on
// the others. Smooth weighted round robin is deterministic: with one
// client at a time, 60 connections over weights 4:1:1 give b1 exactly
// 40 (20 at 1:1:1); the bounds below leave room for nothing but a
// broken weight.
func TestFleetWeightHoldsOnEveryInstance(t *testing.T) {
	srv, fleet, bs := startThreeOnThree(t, "weight", `algorithm = "weighted-round-robin"`)
	a, b, c := fleet[0], fleet[1], fleet[2]
	b1 := bs[0]
	const n = 60
	if got := tagsThrough(t, b, n); got["b1"] > 25 {
		t.Fatalf("b1's share before any weight: %v", got)
	}
	if code, body := fleetAPI(t, "POST", a.admin, "/api/v1/pools/p/backends/"+b1.Addr+"/weight?value=4", ""); code != http.StatusOK || !strings.Contains(body, `"weight_scope":"fleet"`) {
		t.Fatalf("weight on a: %d %s", code, body)
	}
	for _, in := range fleet {
		testnet.Eventually(t, "instance "+in.name+" to take the fleet's weight", func() bool {
			w := fleetBackend(t, in, b1.Addr)
			return w.Weight == 4 && w.WeightScope == "fleet"
		})
		if got := tagsThrough(t, in, n); got["b1"] < 35 || got["b1"] > 45 {
			t.Fatalf("b1's share of %d new clients of %s at weight 4:1:1: %v, want about 40", n, in.name, got)
		}
	}

	// This instance's own weight: c alone.
	if code, body := fleetAPI(t, "POST", c.admin, "/api/v1/pools/p/backends/"+b1.Addr+"/weight?value=1&scope=local", ""); code != http.StatusOK {
		t.Fatalf("local weight on c: %d %s", code, body)
	}
	// 1 is c's file's weight: its own weight ends, and the fleet's holds
	// again there. A local weight other than the file's stays c's.
	if w := fleetBackend(t, c, b1.Addr); w.Weight != 4 || w.WeightScope != "fleet" {
		t.Fatalf("c after scope=local with the file's weight: %+v, want the fleet's 4", w)
	}
	if code, body := fleetAPI(t, "POST", c.admin, "/api/v1/pools/p/backends/"+b1.Addr+"/weight?value=2&scope=local", ""); code != http.StatusOK || !strings.Contains(body, `"weight_scope":"local"`) {
		t.Fatalf("local weight on c: %d %s", code, body)
	}
	time.Sleep(time.Second) // a stray change would have arrived by now
	for _, in := range []*fleetInstance{a, b} {
		if w := fleetBackend(t, in, b1.Addr); w.Weight != 4 || w.WeightScope != "fleet" {
			t.Fatalf("instance %s after c's local weight: %+v, want the fleet's 4", in.name, w)
		}
	}

	// A Redis restart with no data: the weight is written back, and holds.
	srv.Restart()
	testnet.Eventually(t, "redis to hold b1's weight again", func() bool {
		v, err := srv.Do("GET", fleetKey(b1.Addr, "weight"))
		return err == nil && strings.HasSuffix(v, " 1 4 1")
	})
	for _, in := range []*fleetInstance{a, b} {
		in.waitMetric(t, "l4lb_cluster_store_up", "to rejoin", func(v float64) bool { return v == 1 })
		if got := tagsThrough(t, in, n); got["b1"] < 35 || got["b1"] > 45 {
			t.Fatalf("b1's share of %d new clients of %s after the restart: %v, want about 40", n, in.name, got)
		}
	}

	// The reset, through b: every instance back to its file's weight
	// (c keeps its own).
	if code, body := fleetAPI(t, "POST", b.admin, "/api/v1/pools/p/backends/"+b1.Addr+"/weight?value=1", ""); code != http.StatusOK {
		t.Fatalf("reset on b: %d %s", code, body)
	}
	for _, in := range []*fleetInstance{a, b} {
		testnet.Eventually(t, "instance "+in.name+" back to the file's weight", func() bool {
			w := fleetBackend(t, in, b1.Addr)
			return w.Weight == 1 && w.WeightScope == ""
		})
	}
	if w := fleetBackend(t, c, b1.Addr); w.Weight != 2 || w.WeightScope != "local" {
		t.Fatalf("c after the fleet's reset: %+v, want its own 2", w)
	}
}
