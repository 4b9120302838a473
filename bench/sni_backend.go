package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The sni scenario's TLS side: one self-signed certificate for both route
// names, written by the harness into its run directory, and the TLS echo
// servers of the backend role (one per pool, each stamping its tag on the
// first byte of every reply, so the client sees which pool answered).

// sniCert is the certificate the TLS backends serve and the client trusts.
type sniCert struct {
	certPath, keyPath string
	roots             *x509.CertPool
}

// writeSNICert makes a P-256 self-signed certificate valid for every
// route name, writes it and its key into dir, and returns the pool a
// client verifies it with.
func writeSNICert(dir string) (sniCert, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return sniCert{}, err
	}
	var names []string
	for _, p := range sniPools {
		names = append(names, p.host)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "l4lb bench sni"},
		DNSNames:     names,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return sniCert{}, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return sniCert{}, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return sniCert{}, err
	}
	c := sniCert{certPath: filepath.Join(dir, "sni-cert.pem"), keyPath: filepath.Join(dir, "sni-key.pem"), roots: x509.NewCertPool()}
	c.roots.AddCert(cert)
	if err := os.WriteFile(c.certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return sniCert{}, err
	}
	if err := os.WriteFile(c.keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return sniCert{}, err
	}
	return c, nil
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
