package testnet

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TLSCert is a self-signed certificate for a test's TLS servers, its own
// CA: a client that trusts CertPEM verifies it for its names.
type TLSCert struct {
	Cert            tls.Certificate
	CertPEM, KeyPEM []byte
}

// SelfSignedCert makes a certificate (ECDSA P-256, quick to make) for
// names, each a DNS name or an IP literal, valid from an hour ago for a
// day; the first name is also its subject's common name.
func SelfSignedCert(t testing.TB, names ...string) TLSCert {
	t.Helper()
	c, err := NewSelfSignedCert(names...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// NewSelfSignedCert is SelfSignedCert for code that is no test (the bench
// harness's TLS backends): it returns the error.
func NewSelfSignedCert(names ...string) (TLSCert, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return TLSCert{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return TLSCert{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	if len(names) > 0 {
		tmpl.Subject = pkix.Name{CommonName: names[0]}
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return TLSCert{}, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return TLSCert{}, err
	}
	c := TLSCert{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}
	c.Cert, err = tls.X509KeyPair(c.CertPEM, c.KeyPEM)
	return c, err
}

// WriteFiles writes the certificate and its key into dir as name.crt and
// name.key and returns their paths.
func (c TLSCert) WriteFiles(t testing.TB, dir, name string) (certPath, keyPath string) {
	t.Helper()
	certPath, keyPath, err := c.Write(dir, name)
	if err != nil {
		t.Fatal(err)
	}
	return certPath, keyPath
}

// Write is WriteFiles for code that is no test: it returns the error.
func (c TLSCert) Write(dir, name string) (certPath, keyPath string, err error) {
	certPath, keyPath = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err := os.WriteFile(certPath, c.CertPEM, 0o644); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(keyPath, c.KeyPEM, 0o600); err != nil {
		return "", "", err
	}
	return certPath, keyPath, nil
}
