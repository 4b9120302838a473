package proxyproto

import (
	"net/netip"
	"strconv"
)

// Header is what a PROXY header says.
type Header struct {
	// Version is 1 (text) or 2 (binary).
	Version int
	// Local is set when the header carries no usable address: the v2 LOCAL
	// command (a health check by the proxy itself), v1 UNKNOWN, or a v2
	// PROXY command with an UNSPEC or AF_UNIX family or an UNSPEC
	// transport. The receiver then uses the connection's own addresses;
	// Transport, Src and Dst are zero.
	Local bool
	// Transport is Stream (TCP) or Datagram (UDP); v1 is always Stream.
	Transport Transport
	// Src and Dst are the original client and the address it connected to.
	// IPv4 addresses are always 4-byte (IPv4-mapped IPv6 is unmapped).
	Src, Dst netip.AddrPort
}

// Transport is a v2 transport protocol, numbered as on the wire.
type Transport uint8

const (
	// TransportUnspec is the transport of a Local header.
	TransportUnspec Transport = 0
	// Stream is SOCK_STREAM: TCP.
	Stream Transport = 1
	// Datagram is SOCK_DGRAM: UDP.
	Datagram Transport = 2
)

func (t Transport) String() string {
	switch t {
	case TransportUnspec:
		return "unspec"
	case Stream:
		return "stream"
	case Datagram:
		return "dgram"
	}
	return "transport(" + strconv.Itoa(int(t)) + ")"
}

const (
	// MaxV1Length is the longest v1 line, CRLF included (the specification's
	// worst case, "PROXY UNKNOWN" followed by two full IPv6 addresses and
	// two ports). A line with no CRLF within it is invalid.
	MaxV1Length = 107

	// MaxV2Length is the longest v2 header Parse accepts: the 16-byte fixed
	// part and up to 1024 bytes of addresses and TLVs. That holds the
	// largest address block (AF_UNIX, 216 bytes) with over 800 bytes of TLVs
	// to spare; the registered ones together (ALPN, an authority of up to
	// 255 bytes, a unique ID of up to 128, the SSL block with its CN and
	// cipher names, CRC32C) and a cloud provider's ID fit. A longer header is
	// refused once its fixed part is in; ParseLimit takes another limit (the
	// format allows up to 16+65535).
	MaxV2Length = 16 + 1024

	// MaxLength is the most bytes Parse needs to see before it decides:
	// a connection waiting for its header holds at most this many.
	MaxLength = MaxV2Length
)

// v2Signature is the 12 bytes every v2 header starts with.
var v2Signature = [12]byte{0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A}
