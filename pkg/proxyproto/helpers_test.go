package proxyproto

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"strings"
)

// v2 builds a v2 header: the signature, verCmd, fam, the length of the
// joined parts, and the parts.
func v2(verCmd, fam byte, parts ...[]byte) []byte {
	body := bytes.Join(parts, nil)
	return v2len(verCmd, fam, len(body), body)
}

// v2len is v2 with a length field of its own choosing.
func v2len(verCmd, fam byte, length int, body []byte) []byte {
	b := append([]byte(nil), v2Signature[:]...)
	b = append(b, verCmd, fam)
	b = binary.BigEndian.AppendUint16(b, uint16(length))
	return append(b, body...)
}

// inet is a v2 INET address block.
func inet(src, dst string, sport, dport uint16) []byte {
	s, d := netip.MustParseAddr(src).As4(), netip.MustParseAddr(dst).As4()
	b := append(s[:], d[:]...)
	b = binary.BigEndian.AppendUint16(b, sport)
	return binary.BigEndian.AppendUint16(b, dport)
}

// inet6 is a v2 INET6 address block.
func inet6(src, dst string, sport, dport uint16) []byte {
	s, d := netip.MustParseAddr(src).As16(), netip.MustParseAddr(dst).As16()
	b := append(s[:], d[:]...)
	b = binary.BigEndian.AppendUint16(b, sport)
	return binary.BigEndian.AppendUint16(b, dport)
}

// tlv is one TLV.
func tlv(typ byte, value string) []byte {
	b := []byte{typ}
	b = binary.BigEndian.AppendUint16(b, uint16(len(value)))
	return append(b, value...)
}

func ap(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

func repeat(s string, n int) string { return strings.Repeat(s, n) }

// ffff is an IPv6 address of 8 full groups: 39 characters, the longest
// without a dotted tail.
var ffff = strings.TrimSuffix(repeat("ffff:", 8), ":")
