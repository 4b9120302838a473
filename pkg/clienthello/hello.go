package clienthello

import "golang.org/x/crypto/cryptobyte"

// Hello is what a relay routes on in a ClientHello.
type Hello struct {
	// ServerName is the server_name extension's host_name, lowercased and
	// without a trailing dot; "" if the client sent none, or an IP literal.
	ServerName string
	// ALPN are the protocols offered, in the client's order.
	ALPN []string
	// ECH: an encrypted_client_hello extension is present, and ServerName
	// is the outer, public name.
	ECH bool
	// Version is the hello's legacy_version (0x0303 for TLS 1.2 and 1.3).
	Version uint16
	// SupportedVersions are those of the supported_versions extension, in
	// the client's order; nil without it.
	SupportedVersions []uint16
	// WireLen is how many of the connection's first bytes the hello took,
	// its records' headers included; bytes after them are not the hello's.
	WireLen int
}

// Extension types (IANA TLS ExtensionType Values).
const (
	extServerName        = 0
	extALPN              = 16
	extSupportedVersions = 43
	extECH               = 0xfe0d
)

// parseHello reads a ClientHello's body (what follows its handshake
// header), reporting false for anything malformed.
func (r *Reader) parseHello(body []byte) (Hello, bool) {
	var h Hello
	s := cryptobyte.String(body)
	var sessionID, suites, compression cryptobyte.String
	if !s.ReadUint16(&h.Version) || !s.Skip(32) ||
		!s.ReadUint8LengthPrefixed(&sessionID) || len(sessionID) > 32 ||
		!s.ReadUint16LengthPrefixed(&suites) || suites.Empty() || len(suites)%2 != 0 ||
		!s.ReadUint8LengthPrefixed(&compression) || compression.Empty() {
		return Hello{}, false
	}
	if s.Empty() {
		return h, true // no extensions: a client of TLS 1.0's days
	}
	var exts cryptobyte.String
	if !s.ReadUint16LengthPrefixed(&exts) || !s.Empty() {
		return Hello{}, false
	}
	var seen [1 << 16 / 64]uint64 // a bit per extension type
	for !exts.Empty() {
		var typ uint16
		var data cryptobyte.String
		if !exts.ReadUint16(&typ) || !exts.ReadUint16LengthPrefixed(&data) {
			return Hello{}, false
		}
		if seen[typ/64]&(1<<(typ%64)) != 0 {
			return Hello{}, false
		}
		seen[typ/64] |= 1 << (typ % 64)
		ok := true
		switch typ {
		case extServerName:
			h.ServerName, ok = r.readServerName(data)
		case extALPN:
			h.ALPN, ok = r.readALPN(data)
		case extSupportedVersions:
			h.SupportedVersions, ok = r.readVersions(data)
		case extECH:
			h.ECH = true
		}
		if !ok {
			return Hello{}, false
		}
	}
	return h, true
}

// readALPN reads a ProtocolNameList: a non-empty list of non-empty names.
func (r *Reader) readALPN(data cryptobyte.String) ([]string, bool) {
	var list cryptobyte.String
	if !data.ReadUint16LengthPrefixed(&list) || !data.Empty() || list.Empty() {
		return nil, false
	}
	n := 0
	for names := list; !names.Empty(); n++ {
		var proto cryptobyte.String
		if !names.ReadUint8LengthPrefixed(&proto) || proto.Empty() {
			return nil, false
		}
	}
	protos := reused(r, r.protos, n)
	for !list.Empty() {
		var proto cryptobyte.String
		list.ReadUint8LengthPrefixed(&proto) // read once already: it reads
		if n <= maxInternedProtos {
			protos = append(protos, r.intern(proto))
		} else {
			protos = append(protos, string(proto))
		}
	}
	r.protos = protos
	return protos, true
}

// readVersions reads a client's supported_versions: a non-empty list.
func (r *Reader) readVersions(data cryptobyte.String) ([]uint16, bool) {
	var list cryptobyte.String
	if !data.ReadUint8LengthPrefixed(&list) || !data.Empty() || list.Empty() || len(list)%2 != 0 {
		return nil, false
	}
	versions := reused(r, r.versions, len(list)/2)
	for !list.Empty() {
		var v uint16
		list.ReadUint16(&v) // an even count of bytes left: it reads
		versions = append(versions, v)
	}
	r.versions = versions
	return versions, true
}
