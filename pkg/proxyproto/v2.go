package proxyproto

import (
	"encoding/binary"
	"net/netip"
)

// A v2 header is the 12-byte signature, a version/command byte, a
// family/transport byte, a 16-bit big-endian length L, and L bytes: the
// address block of the family, then TLVs.

const (
	v2Fixed = 16 // signature, version/command, family/transport, length

	cmdLocal = 0x0
	cmdProxy = 0x1

	famUnspec = 0x0
	famInet   = 0x1
	famInet6  = 0x2
	famUnix   = 0x3

	addrLenInet  = 2*4 + 2*2
	addrLenInet6 = 2*16 + 2*2
	addrLenUnix  = 2 * 108
)

var addrLen = [...]int{famUnspec: 0, famInet: addrLenInet, famInet6: addrLenInet6, famUnix: addrLenUnix}

func parseV2(b []byte, maxV2 int) (Header, int, error) {
	n := min(len(b), len(v2Signature))
	if string(b[:n]) != string(v2Signature[:n]) {
		return Header{}, 0, errSignature
	}
	if len(b) <= 12 {
		return Header{}, 0, ErrNeedMore
	}
	if b[12]>>4 != 2 {
		return Header{}, 0, errV2Version
	}
	cmd := b[12] & 0xF
	if cmd != cmdLocal && cmd != cmdProxy {
		return Header{}, 0, errV2Command
	}
	if len(b) <= 13 {
		return Header{}, 0, ErrNeedMore
	}
	// LOCAL ignores the family byte altogether; PROXY must name a known
	// family and transport, and with neither UNSPEC its address block.
	fam, proto := b[13]>>4, Transport(b[13]&0xF)
	need := 0
	if cmd == cmdProxy {
		if fam > famUnix {
			return Header{}, 0, errV2Family
		}
		if proto > Datagram {
			return Header{}, 0, errV2Transport
		}
		if proto != TransportUnspec {
			need = addrLen[fam]
		}
	}
	if len(b) < v2Fixed {
		return Header{}, 0, ErrNeedMore
	}
	l := int(binary.BigEndian.Uint16(b[14:16]))
	total := v2Fixed + l
	if total > maxV2 {
		return Header{}, 0, errV2TooLong
	}
	if l < need {
		return Header{}, 0, errV2Short
	}
	if len(b) < total {
		return Header{}, 0, ErrNeedMore
	}
	if need > 0 && !wholeTLVs(b[v2Fixed+need:total]) {
		return Header{}, 0, errV2TLV
	}

	h := Header{Version: 2}
	a := b[v2Fixed:]
	switch {
	case need == 0 || fam == famUnix:
		h.Local = true
	case fam == famInet:
		h.Transport = proto
		h.Src = addrPort(netip.AddrFrom4([4]byte(a[0:4])), binary.BigEndian.Uint16(a[8:10]))
		h.Dst = addrPort(netip.AddrFrom4([4]byte(a[4:8])), binary.BigEndian.Uint16(a[10:12]))
	case fam == famInet6:
		h.Transport = proto
		h.Src = addrPort(netip.AddrFrom16([16]byte(a[0:16])).Unmap(), binary.BigEndian.Uint16(a[32:34]))
		h.Dst = addrPort(netip.AddrFrom16([16]byte(a[16:32])).Unmap(), binary.BigEndian.Uint16(a[34:36]))
	}
	return h, total, nil
}

// wholeTLVs reports whether t is a sequence of whole TLVs: a type byte, a
// 16-bit big-endian length, and that many bytes of value.
func wholeTLVs(t []byte) bool {
	for len(t) > 0 {
		if len(t) < 3 {
			return false
		}
		n := 3 + int(binary.BigEndian.Uint16(t[1:3]))
		if n > len(t) {
			return false
		}
		t = t[n:]
	}
	return true
}
