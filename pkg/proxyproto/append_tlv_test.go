package proxyproto

import (
	"net/netip"
	"strings"
	"testing"
)

func TestAppendTLVCarriesTheAuthority(t *testing.T) {
	src, dst := netip.MustParseAddrPort("192.0.2.7:51234"), netip.MustParseAddrPort("198.51.100.1:443")
	prefix := []byte("xx") // a header need not start the buffer
	hdr := AppendV2(prefix, Stream, src, dst)
	hdr = AppendTLV(hdr, len(prefix), TLVAuthority, "api.example.com")
	h, n, err := Parse(hdr[len(prefix):])
	if err != nil || n != len(hdr)-len(prefix) {
		t.Fatalf("Parse: %v, %d of %d bytes", err, n, len(hdr)-len(prefix))
	}
	if h.Src != src || h.Dst != dst {
		t.Fatalf("parsed %+v, want the addresses", h)
	}
	// After the 16 fixed and 12 address bytes: type, length, value.
	tlv := hdr[len(prefix)+28:]
	if tlv[0] != TLVAuthority || int(tlv[1])<<8|int(tlv[2]) != 15 || string(tlv[3:]) != "api.example.com" {
		t.Fatalf("TLV bytes % x", tlv)
	}
	if got := AppendTLV(hdr, len(prefix), TLVAuthority, strings.Repeat("a", 0x10000)); len(got) != len(hdr) {
		t.Fatal("a TLV longer than its length field was written")
	}
}
