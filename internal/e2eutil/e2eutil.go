// Package e2eutil is what tests that drive a whole l4lb share, whether
// they run the built binary (e2e/) or an instance in the test process
// (cmd/l4lb): a configuration file to run, and the admin endpoint's
// metrics and answers.
package e2eutil

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/l4lb/l4lb/internal/testnet"
)

// WriteConfig writes a one-listener config in front of backends (in dir;
// "": a directory of the test's own) and returns its path, the listener
// address and the admin address. extra goes first (a [global] table, say).
func WriteConfig(t *testing.T, dir string, backends []string, extra string) (path, listen, adminAddr string) {
	t.Helper()
	listen, adminAddr = testnet.FreeAddr(t), testnet.FreeAddr(t)
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n[admin]\nlisten = %q\n[log]\nlevel = \"debug\"\n", extra, adminAddr)
	fmt.Fprintf(&b, "[[listener]]\nname = \"front\"\nbind = %q\npool = \"p\"\n[pool.p]\nalgorithm = \"round-robin\"\n", listen)
	for _, a := range backends {
		fmt.Fprintf(&b, "[[pool.p.backend]]\naddr = %q\n", a)
	}
	if dir == "" {
		dir = t.TempDir()
	}
	path = filepath.Join(dir, "l4lb.toml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, listen, adminAddr
}

// AdminGet GETs url from an l4lb's admin endpoint. A refused connection is
// tried again for a while: l4lb binds its listeners a moment before its
// admin endpoint, so a test that saw a listener accept may ask the
// endpoint before it is there; any other error, or a refusal that lasts,
// fails the test.
func AdminGet(t *testing.T, url string) *http.Response {
	t.Helper()
	var resp *http.Response
	var err error
	testnet.Eventually(t, "the admin endpoint to answer GET "+url, func() bool {
		resp, err = http.Get(url)
		return !errors.Is(err, syscall.ECONNREFUSED)
	})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// Metric is the value of one series (name and labels, as /metrics writes
// them) of the admin endpoint at adminAddr.
func Metric(t *testing.T, adminAddr, series string) float64 {
	t.Helper()
	resp := AdminGet(t, "http://"+adminAddr+"/metrics")
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindSubmatch(body)
	if m == nil {
		t.Fatalf("no series %s in /metrics", series)
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v
}

// PostReload asks l4lb's admin endpoint for a reload: the status and the
// JSON body's error.
func PostReload(t *testing.T, adminAddr string) (int, string) {
	t.Helper()
	return PostJSONError(t, "http://"+adminAddr+"/api/v1/reload")
}

// PostJSONError POSTs to url of the admin API: the status and the JSON
// body's error.
func PostJSONError(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Error string `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("%s answer: %v", url, err)
	}
	return resp.StatusCode, body.Error
}
