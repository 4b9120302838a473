package config

import (
	"fmt"
	"net/netip"
	"strings"
)

// The keys of a tls health check ([pool.NAME.health] type = "tls"):
// server_name and ca_file, as Parse reads them and as CheckHost checks the
// CA file against the host.

// decodeTLSCheck reads the keys of a tls check: server_name, required
// when the check is one (isTLS), and ca_file; either is reported where it
// does not apply (applies false: another type of check).
func decodeTLSCheck(t *table, h *Health, isTLS, applies bool) {
	notTLS := "only for type = \"tls\" checks: a %s check makes no TLS handshake (set type = \"tls\")"
	if !t.misplaced("server_name", applies, notTLS, h.Type) {
		if isTLS {
			t.require("server_name", "the name a tls check sends (SNI) and, with ca_file, verifies, e.g. \"api.example.com\"")
		}
		if t.str("server_name", &h.ServerName) {
			if err := checkServerName(h.ServerName); err != nil {
				t.c.add(t.keyOf("server_name"), "%v", err)
			}
		}
	}
	if !t.misplaced("ca_file", applies, notTLS, h.Type) {
		t.str("ca_file", &h.CAFile)
	}
}

// checkServerName checks a tls check's server_name: a DNS name (sent as
// SNI) or an IP literal (sent as none, which SNI cannot carry, and
// verified against the certificate's IP addresses).
func checkServerName(name string) error {
	if _, err := netip.ParseAddr(name); err == nil {
		return nil
	}
	if strings.Contains(name, "*") {
		return fmt.Errorf("%q is a wildcard: a certificate may name one, a client sends one host's name", name)
	}
	return checkDNSName(name)
}

// checkHealthCAFiles reports a tls check's ca_file that run could not
// use: one it cannot read, or one without a PEM certificate. The checks
// read it again when it changes (health.CAFile); this is the first read.
func checkHealthCAFiles(c *collector, cfg *Config) {
	for _, name := range cfg.PoolNames {
		h := cfg.Pools[name].Health
		if !h.Enabled || h.Type != HealthTLS || h.CAFile == "" {
			continue
		}
		checkCAFile(c, joinKey(joinKey(joinKey("pool", name), "health"), "ca_file"), h.CAFile)
	}
}
