package pick

import (
	"encoding/binary"
	"net/netip"

	"github.com/cespare/xxhash/v2"
)

// keyer turns a client address into the 64-bit key the hashing algorithms
// place.
type keyer struct {
	withPort bool
	hash     func([]byte) uint64 // nil: xxhash
}

// key hashes the 16-byte form of the unmapped address (so 192.0.2.1 and
// ::ffff:192.0.2.1 are one client), followed by the big-endian port when
// the hash key is source-ip-port.
func (k keyer) key(src netip.AddrPort) uint64 {
	var b [18]byte
	a := src.Addr().Unmap().As16()
	copy(b[:], a[:])
	n := 16
	if k.withPort {
		binary.BigEndian.PutUint16(b[16:], src.Port())
		n = 18
	}
	if k.hash == nil {
		return xxhash.Sum64(b[:n]) // declared noescape: b stays on the stack
	}
	// An injected function may keep its argument, which would move b to the
	// heap on every call, default path included; hand it a copy instead.
	return k.hash(append([]byte(nil), b[:n]...))
}
