package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/l4lb/l4lb/pkg/admin"
)

// Every verb becomes its request of the API; flags may come before the
// verb or among its arguments.
func TestCtlRequests(t *testing.T) {
	for _, tc := range []struct {
		args               []string
		method, path, body string
	}{
		{[]string{"pools"}, "GET", "/api/v1/pools", ""},
		{[]string{"pools", "-json"}, "GET", "/api/v1/pools", ""},
		{[]string{"pool", "web"}, "GET", "/api/v1/pools/web", ""},
		{[]string{"disable", "web", "10.0.0.1:80"}, "POST", "/api/v1/pools/web/backends/10.0.0.1:80/disable", ""},
		{[]string{"enable", "web", "[::1]:80"}, "POST", "/api/v1/pools/web/backends/%5B::1%5D:80/enable", ""},
		{[]string{"probe", "web", "10.0.0.1:80"}, "POST", "/api/v1/pools/web/backends/10.0.0.1:80/probe", ""},
		{[]string{"drain", "web", "10.0.0.1:80"}, "POST", "/api/v1/pools/web/backends/10.0.0.1:80/drain", ""},
		{[]string{"drain", "-timeout", "1m30s", "web", "10.0.0.1:80"}, "POST", "/api/v1/pools/web/backends/10.0.0.1:80/drain?timeout=1m30s", ""},
		{[]string{"drain", "web", "10.0.0.1:80", "-timeout=0s"}, "POST", "/api/v1/pools/web/backends/10.0.0.1:80/drain?timeout=0s", ""},
		{[]string{"drain", "-local", "web", "10.0.0.1:80"}, "POST", "/api/v1/pools/web/backends/10.0.0.1:80/drain?scope=local", ""},
		{[]string{"drain", "web", "10.0.0.1:80", "-timeout=0s", "-local"}, "POST", "/api/v1/pools/web/backends/10.0.0.1:80/drain?timeout=0s&scope=local", ""},
		{[]string{"weight", "web", "10.0.0.1:80", "3", "-local"}, "POST", "/api/v1/pools/web/backends/10.0.0.1:80/weight?value=3&scope=local", ""},
		{[]string{"weight", "web", "10.0.0.1:80", "3"}, "POST", "/api/v1/pools/web/backends/10.0.0.1:80/weight?value=3", ""},
		{[]string{"add", "web", "10.0.0.5:80"}, "POST", "/api/v1/pools/web/backends", `{"addr":"10.0.0.5:80"}`},
		{[]string{"add", "web", "-weight", "0", "10.0.0.5:80", "-id", "b5"}, "POST", "/api/v1/pools/web/backends", `{"addr":"10.0.0.5:80","weight":0,"id":"b5"}`},
		{[]string{"remove", "web", "10.0.0.5:80"}, "DELETE", "/api/v1/pools/web/backends/10.0.0.5:80", ""},
		{[]string{"remove", "web", "10.0.0.5:80", "-timeout", "5s"}, "DELETE", "/api/v1/pools/web/backends/10.0.0.5:80?timeout=5s", ""},
		{[]string{"-admin", "127.0.0.1:9100", "reload"}, "POST", "/api/v1/reload", ""},
		{[]string{"-admin", "127.0.0.1:9100", "fleet-replace", "a/b"}, "POST", "/api/v1/pools/a%2Fb/fleet-members/replace", ""},
	} {
		var out, errb bytes.Buffer
		_, req, code, done := parseCtl(tc.args, &out, &errb)
		if done {
			t.Errorf("%q: ended with %d: %s", tc.args, code, errb.String())
			continue
		}
		if req.method != tc.method || req.path != tc.path || string(req.body) != tc.body {
			t.Errorf("%q: %s %s %s, want %s %s %s", tc.args, req.method, req.path, req.body, tc.method, tc.path, tc.body)
		}
	}
	o, _, _, _ := parseCtl([]string{"-admin", "127.0.0.1:9100", "pools", "-json", "-token", "t"}, &bytes.Buffer{}, &bytes.Buffer{})
	if o.admin != "127.0.0.1:9100" || !o.json || o.token != "t" {
		t.Errorf("the flags every verb takes, before and after it: %+v", o)
	}
}

// A bad command line says what is wrong and exits 2; asking for help is
// no error.
func TestCtlCommandLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{nil, 2, "give a verb"},
		{[]string{"flush"}, 2, `unknown verb "flush"`},
		{[]string{"pools", "web"}, 2, "pools takes no arguments, not 1"},
		{[]string{"disable", "web"}, 2, "disable takes 2 arguments (POOL ADDR), not 1"},
		{[]string{"weight", "web", "10.0.0.1:80", "heavy"}, 2, `weight "heavy" is not an integer`},
		{[]string{"drain", "web", "10.0.0.1:80", "-timeout", "soon"}, 2, `"soon" is not a duration`},
		{[]string{"drain", "web", "10.0.0.1:80", "-weight", "2"}, 2, "flag provided but not defined: -weight"},
		{[]string{"add", "web", "10.0.0.1:80", "-weight", "x"}, 2, `"x" is not an integer`},
		{[]string{"pools"}, 2, "say where the admin API is: -admin ADDR, or -config FILE"},
		{[]string{"-admin", "lb1.example:9090", "pools"}, 2, "must be an IP address or localhost"},
		{[]string{"-admin", "9090", "pools"}, 2, `admin address "9090" is not IP:port`},
		{[]string{"-config", filepath.Join(t.TempDir(), "none.toml"), "pools"}, 1, "none.toml: no such file"},
	} {
		var out, errb bytes.Buffer
		code := run(append([]string{"ctl"}, tc.args...), &out, &errb)
		if code != tc.code || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("ctl %q: exit %d, stderr %q; want %d saying %q", tc.args, code, errb.String(), tc.code, tc.want)
		}
	}
	for _, args := range [][]string{{"-h"}, {"drain", "-h"}} {
		var out, errb bytes.Buffer
		if code := run(append([]string{"ctl"}, args...), &out, &errb); code != 0 || !strings.Contains(out.String(), "usage: l4lb ctl") {
			t.Errorf("ctl %q: exit %d, %q %q", args, code, out.String(), errb.String())
		}
	}
	var out bytes.Buffer
	run([]string{"ctl", "-h"}, &out, &bytes.Buffer{})
	for _, verb := range ctlVerbOrder {
		if !strings.Contains(out.String(), "\n  "+ctlVerbSynopsis(verb)) {
			t.Errorf("ctl -h does not list %s", verb)
		}
	}
}

// The endpoint and the token come from the flags, else the file; an
// endpoint on every address is reached on loopback.
func TestCtlFindsTheEndpoint(t *testing.T) {
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	os.WriteFile(token, []byte("s3cret\n"), 0o600)
	file := func(admin string) string {
		path := filepath.Join(t.TempDir(), "l4lb.toml")
		os.WriteFile(path, []byte(admin+"\n[pool.p]\nalgorithm = \"not checked here\"\n"), 0o644)
		return path
	}
	withToken := file("[admin]\nlisten = \"0.0.0.0:9100\"\ntoken_file = " + `"` + token + `"`)
	for _, tc := range []struct {
		name        string
		o           ctlOptions
		acts        bool
		addr, token string
	}{
		{"the file's", ctlOptions{config: withToken}, true, "127.0.0.1:9100", "s3cret"},
		{"a read needs no token", ctlOptions{config: withToken}, false, "127.0.0.1:9100", ""},
		{"the flags first", ctlOptions{config: withToken, admin: "[::]:9200", token: "other"}, true, "[::1]:9200", "other"},
		{"the file's default", ctlOptions{config: file("")}, true, "127.0.0.1:9090", ""},
		{"no file", ctlOptions{admin: "localhost:9100"}, true, "localhost:9100", ""},
	} {
		c, err := newCtlClient(tc.o, tc.acts)
		if err != nil || c.addr != tc.addr || c.token != tc.token {
			t.Errorf("%s: %+v %v, want %s with token %q", tc.name, c, err, tc.addr, tc.token)
		}
	}
	if _, err := newCtlClient(ctlOptions{config: file("[admin]\nlisten = \"\"")}, false); err == nil || !strings.Contains(err.Error(), "turns the admin endpoint off") {
		t.Errorf("an endpoint turned off: %v", err)
	}
	missing := file("[admin]\ntoken_file = \"" + filepath.Join(dir, "none") + "\"")
	if _, err := newCtlClient(ctlOptions{config: missing}, true); err == nil || !strings.Contains(err.Error(), "token_file") {
		t.Errorf("an unreadable token file: %v", err)
	}
	if _, err := newCtlClient(ctlOptions{config: missing}, false); err != nil {
		t.Errorf("a read with an unreadable token file: %v, want no need of it", err)
	}
}

// The table shows each backend's state in words; a drain shows its
// deadline, a failed check its cause.
func TestCtlPoolsTable(t *testing.T) {
	deadline := time.Now().Add(10 * time.Second)
	since := time.Date(2026, 12, 1, 20, 0, 5, 0, time.Local)
	pools := admin.PoolsJSON{Pools: []admin.PoolJSON{
		{Name: "web", Backends: []admin.BackendJSON{
			{Addr: "10.0.0.1:80", Source: "file", Weight: 3, ConfiguredWeight: 3, Usable: true, Health: "up",
				ActiveConnections: 12, Breaker: admin.BreakerJSON{State: "closed"}},
			{Addr: "10.0.0.2:80", Source: "dns", Weight: 0, ConfiguredWeight: 1, Health: "up", Disabled: true,
				Breaker: admin.BreakerJSON{State: "closed"}},
			{Addr: "10.0.0.3:80", Source: "api", Weight: 1, ConfiguredWeight: 1, Health: "down", MaxConnections: 100,
				ActiveConnections: 2, Breaker: admin.BreakerJSON{State: "open", CooldownLeftSeconds: 4.2},
				LastCheckError: "dial tcp 10.0.0.3:80: connect: connection refused"},
			{Addr: "10.0.0.4:80", Source: "file", Weight: 1, ConfiguredWeight: 1, Health: "up", Draining: true,
				ActiveConnections: 3, Breaker: admin.BreakerJSON{State: "closed"},
				Drain: &admin.DrainJSON{Deadline: deadline, DeadlineLeftSeconds: 10, Remaining: 3}},
			{Addr: "10.0.0.5:80", Source: "file", Weight: 4, ConfiguredWeight: 1, WeightScope: "fleet", Health: "up", Draining: true,
				Breaker: admin.BreakerJSON{State: "closed"},
				Drain:   &admin.DrainJSON{Deadline: deadline, DeadlineLeftSeconds: 10, Scope: "fleet"}},
		}, Leaving: []admin.LeavingJSON{{Addr: "10.0.0.6:80", ActiveConnections: 4}}},
		{Name: "empty", Backends: []admin.BackendJSON{}},
		{Name: "dns", Backends: []admin.BackendJSON{}, Discovery: &admin.DiscoveryJSON{Type: "dns", Name: "web.internal:80",
			Backends: 2, Failing: true, FailingSince: &since, LastError: "i/o timeout"}},
		{Name: "srv", Backends: []admin.BackendJSON{}, Discovery: &admin.DiscoveryJSON{Type: "srv", Name: "_web._tcp.internal",
			Backends: 3, EmptySince: &since}},
		{Name: "ok", Backends: []admin.BackendJSON{}, Discovery: &admin.DiscoveryJSON{Type: "dns", Name: "ok.internal:80", Backends: 1}},
	}}
	body, _ := json.Marshal(pools)
	var out bytes.Buffer
	if err := showCtl(&out, ctlRequest{verb: "pools"}, body); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"POOL   BACKEND      SOURCE  WEIGHT                     HEALTH  BREAKER               CONNECTIONS  STATE",
		"web    10.0.0.1:80  file    3                          up      closed                12           in rotation",
		"web    10.0.0.2:80  dns     0 (configured 1)           up      closed                0            disabled",
		"web    10.0.0.3:80  api     1                          down    open (probe in 4.2s)  2/100        out of rotation",
		"web    10.0.0.4:80  file    1                          up      closed                3            draining (3 left, reset in 10s)",
		"web    10.0.0.5:80  file    4 (fleet's; configured 1)  up      closed                0            draining fleet-wide (0 left, reset in 10s)",
		"web    10.0.0.6:80                                                                   4            left the pool",
		"empty  (none)",
		"dns    (none)",
		"srv    (none)",
		"ok     (none)",
		"web 10.0.0.3:80: last health check: dial tcp 10.0.0.3:80: connect: connection refused",
		"dns: DNS discovery of web.internal:80 failing since 20:00:05 (i/o timeout); the last 2 backends found serve",
		"srv: DNS discovery of _web._tcp.internal finds no records since 20:00:05; the last 3 backends found serve until empty_grace ends",
	}
	got := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	for i := range got {
		got[i] = strings.TrimRight(got[i], " ")
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("table:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	out.Reset()
	b, _ := json.Marshal(pools.Pools[0].Backends[3])
	req := ctlRequest{verb: "drain", args: []string{"web", "10.0.0.4:80"}}
	if err := showCtl(&out, req, b); err != nil {
		t.Fatal(err)
	}
	if first := strings.SplitN(out.String(), "\n", 2)[0]; first != "draining 10.0.0.4:80 in pool web: no new clients; the 3 connections open are reset at "+deadline.Local().Format(time.TimeOnly)+" unless they end first" {
		t.Errorf("drain says %q", first)
	}
	out.Reset()
	if err := showCtl(&out, ctlRequest{verb: "reload"}, []byte(`{"result":"ok","hash":"0123456789abcdef","listeners_kept":2,"pools":1,
		"warnings":["global.event_loops changed: restart to apply"],"changes":{"backends_added":["p/10.0.0.9:80"]}}`)); err != nil {
		t.Fatal(err)
	}
	if want := "reloaded (0123456789ab): listeners 2 kept, 0 added, 0 removed; 1 pools\n  backends added: p/10.0.0.9:80\nwarning: global.event_loops changed: restart to apply\n"; out.String() != want {
		t.Errorf("reload says %q, want %q", out.String(), want)
	}
	out.Reset()
	pb, _ := json.Marshal(pools.Pools[0])
	if err := showCtl(&out, ctlRequest{verb: "fleet-replace", args: []string{"web"}}, pb); err != nil {
		t.Fatal(err)
	}
	if first := strings.SplitN(out.String(), "\n", 2)[0]; first != "the fleet's record of pool web's API-added backends is now this instance's list: every instance follows it" {
		t.Errorf("fleet-replace says %q", first)
	}
	if !strings.Contains(out.String(), "10.0.0.4:80") {
		t.Errorf("fleet-replace prints no table of the pool: %q", out.String())
	}
}

// What the API refused is said with its status; an endpoint that is not
// l4lb's is named as such.
func TestCtlAPIErrors(t *testing.T) {
	var out bytes.Buffer
	printAPIError(&out, 400, []byte(`{"error":"reload failed: the running configuration stays","errors":["l4lb.toml:3: pool.p: bad","l4lb.toml:9: x"]}`))
	if want := "ctl: reload failed: the running configuration stays (400 Bad Request)\n  l4lb.toml:3: pool.p: bad\n  l4lb.toml:9: x\n"; out.String() != want {
		t.Errorf("%q, want %q", out.String(), want)
	}
	out.Reset()
	printAPIError(&out, 404, []byte("404 page not found\n"))
	if !strings.Contains(out.String(), `not as l4lb's admin API does: "404 page not found"`) {
		t.Errorf("%q", out.String())
	}
}

// -json prints the API's body byte for byte, an error's too (and says the
// error on stderr, exit 1).
func TestCtlJSONAsItComes(t *testing.T) {
	const pools = "{\"pools\": [ ],\n \"extra\":1}\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/pools" {
			w.Write([]byte(pools))
			return
		}
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"error":"unknown pool \"nope\""}`))
	}))
	defer srv.Close()
	addr := srv.URL[len("http://"):]
	var out, errb bytes.Buffer
	if code := run([]string{"ctl", "-admin", addr, "-json", "pools"}, &out, &errb); code != 0 || out.String() != pools || errb.Len() != 0 {
		t.Errorf("pools -json: exit %d, %q %q; want the body unchanged", code, out.String(), errb.String())
	}
	out.Reset()
	errb.Reset()
	if code := run([]string{"ctl", "-admin", addr, "-json", "pool", "nope"}, &out, &errb); code != 1 || out.String() != `{"error":"unknown pool \"nope\""}` || !strings.Contains(errb.String(), "ctl: unknown pool") {
		t.Errorf("pool nope -json: exit %d, %q %q", code, out.String(), errb.String())
	}
}
