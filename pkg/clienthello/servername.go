package clienthello

import (
	"net/netip"

	"golang.org/x/crypto/cryptobyte"
)

const (
	nameTypeHostName = 0
	maxNameLen       = 253 // a DNS name's text form, without the root's dot
	maxLabelLen      = 63
)

// readServerName reads a ServerNameList (RFC 6066 section 3) and returns
// its host_name, normalized (see hostName); other name types are skipped.
func (r *Reader) readServerName(data cryptobyte.String) (string, bool) {
	var list cryptobyte.String
	if !data.ReadUint16LengthPrefixed(&list) || !data.Empty() || list.Empty() {
		return "", false
	}
	var host cryptobyte.String
	found := false
	for !list.Empty() {
		var typ uint8
		var name cryptobyte.String
		if !list.ReadUint8(&typ) || !list.ReadUint16LengthPrefixed(&name) || name.Empty() {
			return "", false
		}
		if typ != nameTypeHostName {
			continue
		}
		if found {
			return "", false // one name of a type at most
		}
		host, found = name, true
	}
	if !found {
		return "", true
	}
	return r.hostName(host)
}

// hostName checks and normalizes a host_name: one trailing dot dropped, an
// IP literal ignored (""), the rest a DNS name of letters, digits, '-' and
// '_' in labels of 1 to 63 bytes, 253 at most in all, lowercased.
func (r *Reader) hostName(name []byte) (string, bool) {
	if name[len(name)-1] == '.' {
		name = name[:len(name)-1]
	}
	if len(name) == 0 || len(name) > maxNameLen {
		return "", false
	}
	if maybeIP(name) {
		if _, err := netip.ParseAddr(string(name)); err == nil {
			return "", true
		}
	}
	var buf [maxNameLen]byte
	out := buf[:len(name)]
	label := 0
	for i, c := range name {
		switch {
		case c == '.':
			if label == 0 {
				return "", false
			}
			label = 0
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
			label++
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '_':
			label++
		default:
			return "", false
		}
		if label > maxLabelLen {
			return "", false
		}
		out[i] = c
	}
	if label == 0 {
		return "", false // an empty last label: the name ended in two dots
	}
	return r.intern(out), true
}

// maybeIP tells the names worth asking netip about: with a colon (IPv6)
// or of digits and dots only (IPv4), so that names are not.
func maybeIP(name []byte) bool {
	digits := true
	for _, c := range name {
		if c == ':' {
			return true
		}
		if c != '.' && (c < '0' || c > '9') {
			digits = false
		}
	}
	return digits
}
