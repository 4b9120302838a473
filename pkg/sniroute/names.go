package sniroute

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// Bounds of a server name (RFC 1035, without the trailing dot) and of an
// ALPN protocol name (RFC 7301).
const (
	MaxNameLen     = 253
	maxLabelLen    = 63
	MaxProtocolLen = 255
)

// wildcardPrefix starts a wildcard name: "*." and the suffix it covers.
const wildcardPrefix = "*."

// normalize is how names are compared: ASCII lower case, one trailing dot
// dropped.
func normalize(name string) string {
	return strings.ToLower(strings.TrimSuffix(name, "."))
}

// CheckName reports why name cannot be a route's sni entry, or nil: an
// exact host name or "*." and one.
func CheckName(name string) error {
	n := strings.TrimSuffix(name, ".")
	host, _ := strings.CutPrefix(n, wildcardPrefix)
	switch {
	case n == "":
		return errors.New("an empty name")
	case n == "*":
		return errors.New(`"*" alone would match every name: a wildcard covers one label under a suffix, "*.example.com"; the listener's pool takes what no route matches`)
	case strings.Contains(host, "*"):
		return errors.New(`"*" may only be the whole leftmost label ("*.example.com"): a partial or inner wildcard ("a*.example.com", "a.*.example.com") matches nothing a TLS client sends`)
	case isIPLiteral(host):
		return errors.New("an IP address: TLS clients send no server name for an IP literal (RFC 6066), so the route could never match it")
	case len(n) > MaxNameLen:
		return fmt.Errorf("%d characters long, more than the %d of a DNS name", len(n), MaxNameLen)
	}
	labels := strings.Split(host, ".")
	for _, label := range labels {
		if err := checkLabel(label); err != nil {
			return err
		}
	}
	if last := labels[len(labels)-1]; strings.Trim(last, "0123456789") == "" {
		return fmt.Errorf("ends in the all-numeric label %q: not a host name (an IPv4 address?)", last)
	}
	return nil
}

func isIPLiteral(s string) bool {
	if strings.HasPrefix(s, "[") {
		return true
	}
	_, err := netip.ParseAddr(s)
	return err == nil
}

func checkLabel(label string) error {
	switch {
	case label == "":
		return errors.New(`an empty label (".." or a leading ".")`)
	case len(label) > maxLabelLen:
		return fmt.Errorf("label %q is %d characters long, more than the %d of a DNS label", label, len(label), maxLabelLen)
	case label[0] == '-' || label[len(label)-1] == '-':
		return fmt.Errorf("label %q starts or ends with '-'", label)
	}
	for i := 0; i < len(label); i++ {
		if c := label[i]; !isLabelByte(c) {
			return fmt.Errorf("byte %q in label %q: a server name is letters, digits, '-' and '_' (a non-ASCII name is written in its xn-- form)", c, label)
		}
	}
	return nil
}

func isLabelByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

// CheckProtocol reports why p cannot be an ALPN protocol of a route, or
// nil. Protocols are compared byte for byte, as RFC 7301 says.
func CheckProtocol(p string) error {
	switch {
	case p == "":
		return errors.New(`an empty protocol name: ALPN names are "h2", "http/1.1" and the like`)
	case len(p) > MaxProtocolLen:
		return fmt.Errorf("%d bytes long, more than the %d an ALPN name takes", len(p), MaxProtocolLen)
	}
	return nil
}
