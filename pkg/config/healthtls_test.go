package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// tlsHealth is a valid file whose pool web has a [health] table of keys.
func tlsHealth(keys string) string { return validBase + "[pool.web.health]\n" + keys }

func TestParseTLSCheck(t *testing.T) {
	cfg := mustParse(t, tlsHealth("type = \"tls\"\nserver_name = \"api.example.com\"\nca_file = \"/etc/l4lb/ca.pem\"\nport = 8443\n"))
	h := cfg.Pools["web"].Health
	if h.Type != HealthTLS || h.ServerName != "api.example.com" || h.CAFile != "/etc/l4lb/ca.pem" || h.Port != 8443 {
		t.Fatalf("health = %+v, want a tls check of api.example.com verified against /etc/l4lb/ca.pem on port 8443", h)
	}
	for _, src := range []string{
		tlsHealth("type = \"tls\"\nserver_name = \"backend.test\"\n"),       // no verification
		tlsHealth("type = \"tls\"\nserver_name = \"10.0.0.7\"\n"),           // an IP: no SNI, the IP verified
		tlsHealth("type = \"tls\"\nserver_name = \"::1\"\n"),                // of either family
		tlsHealth("type = \"tls\"\nserver_name = \"example.com.\"\n"),       // a trailing dot
		tlsHealth("enabled = false\ntype = \"tls\"\nserver_name = \"a\"\n"), // off, still well-formed
	} {
		mustParse(t, src)
	}
	const notTLS = `only for type = "tls" checks: a %s check makes no TLS handshake (set type = "tls")`
	tests := []problem{
		{"server_name required", validBase + "[pool.web.health] #!\ntype = \"tls\"\n", "pool.web.health.server_name", `required key is missing: the name a tls check sends (SNI)`},
		{"server_name empty", tlsHealth("type = \"tls\"\nserver_name = \"\" #!\n"), "pool.web.health.server_name", `"" is not a DNS name`},
		{"server_name a wildcard", tlsHealth("type = \"tls\"\nserver_name = \"*.example.com\" #!\n"), "pool.web.health.server_name", "is a wildcard"},
		{"server_name with a space", tlsHealth("type = \"tls\"\nserver_name = \"a b\" #!\n"), "pool.web.health.server_name", "' ' may not appear in a label"},
		{"server_name a URL", tlsHealth("type = \"tls\"\nserver_name = \"https://a.test\" #!\n"), "pool.web.health.server_name", "':' may not appear in a label"},
		{"server_name a number", tlsHealth("type = \"tls\"\nserver_name = 1 #!\n"), "pool.web.health.server_name", "must be a string"},
		{"server_name on a connect check", tlsHealth("server_name = \"a.test\" #!\n"), "pool.web.health.server_name", fmt.Sprintf(notTLS, "connect")},
		{"ca_file on a send-expect check", tlsHealth("type = \"send-expect\"\nca_file = \"/ca.pem\" #!\n"), "pool.web.health.ca_file", fmt.Sprintf(notTLS, "send-expect")},
		{"tls on a udp pool", validUDP + "[pool.dns.health]\ntype = \"tls\" #!\nserver_name = \"a.test\"\n", "pool.dns.health.type", `"tls" checks are for TCP pools`},
	}
	for _, p := range tests {
		t.Run(p.name, func(t *testing.T) { wantOneError(t, p, parseErrors(t, p.src)) })
	}
}

// run reads a tls check's ca_file: check says when it cannot.
func TestCheckHostHealthCAFile(t *testing.T) {
	dir := t.TempDir()
	ca, _ := writePair(t, dir, "ca")
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")
	withCA := func(path, extra string) string {
		return tlsHealth("type = \"tls\"\nserver_name = \"a.test\"\n" + extra + "ca_file = " + strconv.Quote(path) + " #!\n")
	}
	if errs := hostErrors(t, withCA(ca, "")); errs != nil {
		t.Errorf("a readable CA bundle: %v", errs)
	}
	if errs := hostErrors(t, withCA(missing, "enabled = false\n")); errs != nil {
		t.Errorf("the CA file of a check that is off: %v", errs)
	}
	tests := []problem{
		{"missing ca_file", withCA(missing, ""), "pool.web.health.ca_file", "cannot read the CA bundle: open " + missing},
		{"ca_file a directory", withCA(dir, ""), "pool.web.health.ca_file", "cannot read the CA bundle"},
		{"ca_file not PEM", withCA(notPEM, ""), "pool.web.health.ca_file", "holds no PEM certificate"},
	}
	for _, p := range tests {
		t.Run(p.name, func(t *testing.T) { wantOneError(t, p, hostErrors(t, p.src)) })
	}
}
