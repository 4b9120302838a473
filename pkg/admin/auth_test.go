package admin

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/l4lb/l4lb/pkg/config"
)

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestReadToken(t *testing.T) {
	if tok, err := ReadToken(""); tok != "" || err != nil {
		t.Fatalf(`ReadToken(""): %q %v, want no token`, tok, err)
	}
	if tok, err := ReadToken(writeFile(t, "  s3cret\n")); tok != "s3cret" || err != nil {
		t.Fatalf("ReadToken: %q %v, want the trimmed token", tok, err)
	}
	for name, path := range map[string]string{
		"missing":          filepath.Join(t.TempDir(), "no-such-token"),
		"empty":            writeFile(t, ""),
		"white space only": writeFile(t, " \n\t\n"),
		"two lines":        writeFile(t, "s3cret\nmore\n"),
		"a directory":      t.TempDir(),
	} {
		if tok, err := ReadToken(path); err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("%s token file: %q %v, want an error naming %s", name, tok, err, path)
		}
	}
}

// A token file that cannot serve fails start-up, naming the file, before
// anything is bound.
func TestStartRefusesABadTokenFile(t *testing.T) {
	log, _ := newLog()
	path := writeFile(t, "\n")
	s, err := Start(config.Admin{Listen: "127.0.0.1:0", TokenFile: path, MaxConnections: 4}, Sources{}, log)
	if err == nil {
		s.Close()
		t.Fatal("started with an empty token file")
	}
	if !strings.Contains(err.Error(), path) {
		t.Fatalf("error %q does not name %s", err, path)
	}
}

func TestTokenGuardsPOSTRoutesOnly(t *testing.T) {
	srv, p := newTokenServer(t, "s3cret")
	disable := "/api/v1/pools/web/backends/127.0.0.1:9001/disable"
	for _, tc := range []struct {
		name, method, path, auth string
		code                     int
	}{
		{"POST without a token", "POST", disable, "", 401},
		{"POST with a wrong token", "POST", disable, "Bearer s3cre", 401},
		{"POST with a longer token", "POST", disable, "Bearer s3cret!", 401},
		{"POST with another scheme", "POST", disable, "Basic s3cret", 401},
		{"POST with the bare token", "POST", disable, "s3cret", 401},
		{"POST to an unknown route without a token", "POST", "/api/v1/nope", "", 401},
		{"GET without a token", "GET", "/api/v1/pools", "", 200},
		{"GET a pool without a token", "GET", "/api/v1/pools/web", "", 200},
		{"POST with the token", "POST", disable, "Bearer s3cret", 200},
		{"scheme in any case", "POST", "/api/v1/pools/web/backends/127.0.0.1:9001/enable", "bearer s3cret", 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hdr := map[string]string{}
			if tc.auth != "" {
				hdr["Authorization"] = tc.auth
			}
			code, v := do(t, tc.method, srv.URL+tc.path, hdr)
			if code != tc.code {
				t.Fatalf("%d %v, want %d", code, v, tc.code)
			}
			if code == 401 && !strings.Contains(v["error"].(string), "Authorization: Bearer") {
				t.Fatalf("401 error %q does not say what to send", v["error"])
			}
		})
	}
	if b, _ := p.Backend("127.0.0.1:9001"); b.Breaker().Disabled {
		t.Fatal("backend disabled after the last call enabled it")
	}
	resp, err := http.Post(srv.URL+disable, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer") {
		t.Fatalf("401 without a Bearer challenge: %q", got)
	}
	if b, _ := p.Backend("127.0.0.1:9001"); b.Breaker().Disabled {
		t.Fatal("an unauthenticated POST disabled the backend")
	}
	resp, err = http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/metrics with a token set: %d, want open", resp.StatusCode)
	}
}

// Start reads the token file and guards with it.
func TestStartUsesTheTokenFile(t *testing.T) {
	s, p, _ := startAdmin(t, config.Admin{Listen: "127.0.0.1:0", TokenFile: writeFile(t, "s3cret\n")}, testTimeouts)
	url := "http://" + s.Addr().String() + "/api/v1/pools/web/backends/127.0.0.1:9001/disable"
	if code, _ := do(t, "POST", url, nil); code != 401 {
		t.Fatalf("POST without a token: %d, want 401", code)
	}
	if code, _ := do(t, "POST", url, map[string]string{"Authorization": "Bearer s3cret"}); code != 200 {
		t.Fatalf("POST with the file's token: %d, want 200", code)
	}
	if b, _ := p.Backend("127.0.0.1:9001"); !b.Breaker().Disabled {
		t.Fatal("the authenticated POST did not disable the backend")
	}
}
