package proxyproto

import (
	"encoding/binary"
	"net/netip"
	"strconv"
)

// AppendV1 appends to buf the v1 line for a TCP connection from src to dst
// and returns the extended buffer. Both IPv4 (IPv4-mapped IPv6 counts as
// IPv4): "PROXY TCP4 ...". Otherwise "PROXY TCP6 ...", the IPv4 side of a
// v4/v6 mix written as IPv4-mapped IPv6. Zones are dropped. When either
// address is invalid (the zero netip.Addr) it appends "PROXY UNKNOWN\r\n",
// which the receiver takes as "use the connection's own addresses".
//
// It allocates only when buf lacks room (at most MaxV1Length bytes).
func AppendV1(buf []byte, src, dst netip.AddrPort) []byte {
	s, d := src.Addr().Unmap().WithZone(""), dst.Addr().Unmap().WithZone("")
	if !s.IsValid() || !d.IsValid() {
		return append(buf, "PROXY UNKNOWN\r\n"...)
	}
	if s.Is4() && d.Is4() {
		buf = append(buf, "PROXY TCP4 "...)
	} else {
		s, d = netip.AddrFrom16(s.As16()), netip.AddrFrom16(d.As16())
		buf = append(buf, "PROXY TCP6 "...)
	}
	buf = s.AppendTo(buf)
	buf = append(buf, ' ')
	buf = d.AppendTo(buf)
	buf = append(buf, ' ')
	buf = strconv.AppendUint(buf, uint64(src.Port()), 10)
	buf = append(buf, ' ')
	buf = strconv.AppendUint(buf, uint64(dst.Port()), 10)
	return append(buf, '\r', '\n')
}

// AppendV2 appends to buf the v2 header, PROXY command, for a connection of
// transport t (Stream or Datagram) from src to dst, without TLVs, and returns
// the extended buffer. Both IPv4 (IPv4-mapped IPv6 counts as IPv4): family
// INET, 28 bytes. Otherwise INET6, 52 bytes, the IPv4 side of a v4/v6 mix as
// IPv4-mapped IPv6. When t is neither Stream nor Datagram or either address
// is invalid it appends a PROXY header with family and transport UNSPEC and
// no address (16 bytes), which the receiver takes as "use the connection's
// own addresses".
//
// It allocates only when buf lacks room.
func AppendV2(buf []byte, t Transport, src, dst netip.AddrPort) []byte {
	buf = append(buf, v2Signature[:]...)
	s, d := src.Addr().Unmap(), dst.Addr().Unmap()
	switch {
	case (t != Stream && t != Datagram) || !s.IsValid() || !d.IsValid():
		return append(buf, 0x20|cmdProxy, famUnspec<<4, 0, 0)
	case s.Is4() && d.Is4():
		buf = append(buf, 0x20|cmdProxy, famInet<<4|byte(t), 0, addrLenInet)
		s4, d4 := s.As4(), d.As4()
		buf = append(buf, s4[:]...)
		buf = append(buf, d4[:]...)
	default:
		buf = append(buf, 0x20|cmdProxy, famInet6<<4|byte(t), 0, addrLenInet6)
		// AppendBinary writes the 16 bytes straight into buf; copying
		// them out of As16's array stalls on store forwarding (50 ns
		// for the header instead of 18).
		buf, _ = as16(s).AppendBinary(buf)
		buf, _ = as16(d).AppendBinary(buf)
	}
	buf = binary.BigEndian.AppendUint16(buf, src.Port())
	return binary.BigEndian.AppendUint16(buf, dst.Port())
}

// Registered TLV types of the v2 header that l4lb writes.
const (
	// TLVAuthority is PP2_TYPE_AUTHORITY: the host name the client asked
	// for (the TLS server name, SNI), UTF-8, without a terminating NUL.
	TLVAuthority = 0x02
)

// AppendTLV appends one TLV of type typ to the v2 header that hdr ends
// with (hdr[start:] is that header, as AppendV2 wrote it) and grows its
// length field to cover it. A value longer than 65535 bytes, or one
// that would take the header past 65535 bytes of addresses and TLVs,
// leaves hdr as it was: the receiver would misread the header.
func AppendTLV(hdr []byte, start int, typ byte, value string) []byte {
	h := hdr[start:]
	length := int(binary.BigEndian.Uint16(h[14:16]))
	if len(value) > 0xffff || length+3+len(value) > 0xffff {
		return hdr
	}
	hdr = append(hdr, typ)
	hdr = binary.BigEndian.AppendUint16(hdr, uint16(len(value)))
	hdr = append(hdr, value...)
	binary.BigEndian.PutUint16(hdr[start+14:start+16], uint16(length+3+len(value)))
	return hdr
}

// AppendV2Local appends to buf the 16-byte v2 header with the LOCAL command
// (family UNSPEC, no address): a connection the proxy makes on its own
// behalf, such as a health check. It returns the extended buffer.
func AppendV2Local(buf []byte) []byte {
	buf = append(buf, v2Signature[:]...)
	return append(buf, 0x20|cmdLocal, famUnspec<<4, 0, 0)
}

// as16 is a as an IPv6 address without zone, IPv4 mapped: what AppendBinary
// writes as 16 bytes.
func as16(a netip.Addr) netip.Addr {
	if a.Is4() {
		return netip.AddrFrom16(a.As16())
	}
	return a.WithZone("")
}
