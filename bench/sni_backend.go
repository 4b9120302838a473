package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"strings"

	"github.com/l4lb/l4lb/internal/testnet"
)

// The sni scenario's TLS side: one self-signed certificate for both route
// names, written by the harness into its run directory (sni.crt, sni.key), and the TLS echo
// servers of the backend role (one per pool, each stamping its tag on the
// first byte of every reply, so the client sees which pool answered).

// sniCert is the certificate the TLS backends serve and the client trusts.
type sniCert struct {
	certPath, keyPath string
	roots             *x509.CertPool
}

// writeSNICert makes a self-signed certificate valid for every route
// name (internal/testnet's, as the tests use), writes it and its key into
// dir, and returns the pool a client verifies it with.
func writeSNICert(dir string) (sniCert, error) {
	var names []string
	for _, p := range sniPools {
		names = append(names, p.host)
	}
	cert, err := testnet.NewSelfSignedCert(names...)
	if err != nil {
		return sniCert{}, err
	}
	c := sniCert{roots: x509.NewCertPool()}
	if !c.roots.AppendCertsFromPEM(cert.CertPEM) {
		return sniCert{}, fmt.Errorf("sni: the certificate made does not parse")
	}
	c.certPath, c.keyPath, err = cert.Write(dir, "sni")
	return c, err
}

// sniBackendArgs are the backend role's flags for the TLS echos.
func sniBackendArgs(base int, c sniCert) []string {
	var addrs []string
	for k := range sniBackendCount {
		addrs = append(addrs, loopAddr(sniBackendPort(base, k)))
	}
	return []string{"-tls-echo", strings.Join(addrs, ","), "-tls-cert", c.certPath, "-tls-key", c.keyPath}
}

// startTLSEchos serves a TLS echo on each address of the comma list, the
// k-th stamping tag k+1 (sniTag); "" starts none.
func startTLSEchos(list, certPath, keyPath string) error {
	if list == "" {
		return nil
	}
	cert, err := tls.LoadX509KeyPair(certPath, keyPath)
	if err != nil {
		return fmt.Errorf("tls echo: %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}}
	for k, addr := range strings.Split(list, ",") {
		l, err := listenLoopback(addr)
		if err != nil {
			return fmt.Errorf("tls echo: %w", err)
		}
		tag := sniTag(k)
		go serve(l, func(c *net.TCPConn) { echoConn(tls.Server(c, cfg), tag) })
	}
	return nil
}
