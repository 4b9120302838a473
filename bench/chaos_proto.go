package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// The chaos wire protocol, between a chaos client and a chaos backend,
// relayed by l4lb, which must not change a byte of it.
//
//	backend -> client  hello (24 B), sent the moment the backend accepts:
//	                   who served the connection (backend id, pid, the port
//	                   l4lb dialed from), so every outcome is attributable.
//	client -> backend  request header (44 B): connection id, seed, request
//	                   and response lengths, flags (half-close), then
//	                   ReqLen bytes of the request stream.
//	backend -> client  RespLen bytes of the response stream, then the trailer
//	                   (60 B): how many request bytes arrived, the offset of
//	                   the first wrong one (-1: none), their sha256, and
//	                   whether the request ended early behind a FIN.
//
// Both streams are a pure function of (seed, offset), so each side checks
// every byte it receives where it lands, without keeping the stream: a
// wrong byte (corruption) is told from a missing tail (truncation), and a
// wrong byte is located. Every header carries a CRC, so a damaged header is
// corruption too, never a misparse.
const (
	chaosReqMagic     = "CHQ1"
	chaosHelloMagic   = "CHH1"
	chaosTrailerMagic = "CHT1"
	chaosReqLen       = 44
	chaosHelloLen     = 24
	chaosTrailerLen   = 60

	chaosFlagHalfClose = 1 << 0

	// trailer status
	chaosTrailerOK    = 0
	chaosTrailerShort = 1 // the request ended with a FIN before ReqLen bytes

	// respSeedXor derives the response stream's seed from the request's.
	respSeedXor = 0xA5A5_5A5A_C3C3_3C3C
)

var errChaosCRC = errors.New("bad checksum")

type chaosRequest struct {
	ID      uint64
	Seed    uint64
	ReqLen  uint64
	RespLen uint64
	Flags   uint32
}

func (r chaosRequest) halfClose() bool  { return r.Flags&chaosFlagHalfClose != 0 }
func (r chaosRequest) respSeed() uint64 { return r.Seed ^ respSeedXor }

func (r chaosRequest) marshal() []byte {
	b := make([]byte, chaosReqLen)
	copy(b, chaosReqMagic)
	binary.BigEndian.PutUint64(b[4:], r.ID)
	binary.BigEndian.PutUint64(b[12:], r.Seed)
	binary.BigEndian.PutUint64(b[20:], r.ReqLen)
	binary.BigEndian.PutUint64(b[28:], r.RespLen)
	binary.BigEndian.PutUint32(b[36:], r.Flags)
	binary.BigEndian.PutUint32(b[40:], crc32.ChecksumIEEE(b[:40]))
	return b
}

func parseChaosRequest(b []byte) (chaosRequest, error) {
	if len(b) != chaosReqLen {
		return chaosRequest{}, fmt.Errorf("request header: %d bytes", len(b))
	}
	if string(b[:4]) != chaosReqMagic {
		return chaosRequest{}, fmt.Errorf("request header: magic %q", b[:4])
	}
	if crc32.ChecksumIEEE(b[:40]) != binary.BigEndian.Uint32(b[40:]) {
		return chaosRequest{}, fmt.Errorf("request header: %w", errChaosCRC)
	}
	return chaosRequest{
		ID: binary.BigEndian.Uint64(b[4:]), Seed: binary.BigEndian.Uint64(b[12:]),
		ReqLen: binary.BigEndian.Uint64(b[20:]), RespLen: binary.BigEndian.Uint64(b[28:]),
		Flags: binary.BigEndian.Uint32(b[36:]),
	}, nil
}

type chaosHello struct {
	Backend   uint32
	PID       uint32
	PeerPort  uint16 // the port l4lb dialed from: links this stream to the packets seen on lo
	LocalPort uint16 // the backend's own port
	Seq       uint32 // the backend process's accept counter
}

func (h chaosHello) marshal() []byte {
	b := make([]byte, chaosHelloLen)
	copy(b, chaosHelloMagic)
	binary.BigEndian.PutUint32(b[4:], h.Backend)
	binary.BigEndian.PutUint32(b[8:], h.PID)
	binary.BigEndian.PutUint16(b[12:], h.PeerPort)
	binary.BigEndian.PutUint16(b[14:], h.LocalPort)
	binary.BigEndian.PutUint32(b[16:], h.Seq)
	binary.BigEndian.PutUint32(b[20:], crc32.ChecksumIEEE(b[:20]))
	return b
}

func parseChaosHello(b []byte) (chaosHello, error) {
	if len(b) != chaosHelloLen {
		return chaosHello{}, fmt.Errorf("hello: %d bytes", len(b))
	}
	if string(b[:4]) != chaosHelloMagic {
		return chaosHello{}, fmt.Errorf("hello: magic %q", b[:4])
	}
	if crc32.ChecksumIEEE(b[:20]) != binary.BigEndian.Uint32(b[20:]) {
		return chaosHello{}, fmt.Errorf("hello: %w", errChaosCRC)
	}
	return chaosHello{
		Backend: binary.BigEndian.Uint32(b[4:]), PID: binary.BigEndian.Uint32(b[8:]),
		PeerPort: binary.BigEndian.Uint16(b[12:]), LocalPort: binary.BigEndian.Uint16(b[14:]),
		Seq: binary.BigEndian.Uint32(b[16:]),
	}, nil
}

type chaosTrailer struct {
	RxLen    uint64
	FirstBad int64 // offset of the first wrong request byte; -1: none
	Sum      [32]byte
	Status   uint32
}

func (t chaosTrailer) marshal() []byte {
	b := make([]byte, chaosTrailerLen)
	copy(b, chaosTrailerMagic)
	binary.BigEndian.PutUint64(b[4:], t.RxLen)
	binary.BigEndian.PutUint64(b[12:], uint64(t.FirstBad))
	copy(b[20:52], t.Sum[:])
	binary.BigEndian.PutUint32(b[52:], t.Status)
	binary.BigEndian.PutUint32(b[56:], crc32.ChecksumIEEE(b[:56]))
	return b
}

func parseChaosTrailer(b []byte) (chaosTrailer, error) {
	if len(b) != chaosTrailerLen {
		return chaosTrailer{}, fmt.Errorf("trailer: %d bytes", len(b))
	}
	if string(b[:4]) != chaosTrailerMagic {
		return chaosTrailer{}, fmt.Errorf("trailer: magic %q", b[:4])
	}
	if crc32.ChecksumIEEE(b[:56]) != binary.BigEndian.Uint32(b[56:]) {
		return chaosTrailer{}, fmt.Errorf("trailer: %w", errChaosCRC)
	}
	t := chaosTrailer{
		RxLen: binary.BigEndian.Uint64(b[4:]), FirstBad: int64(binary.BigEndian.Uint64(b[12:])),
		Status: binary.BigEndian.Uint32(b[52:]),
	}
	copy(t.Sum[:], b[20:52])
	return t, nil
}

// streamWord is word i of the stream seed (splitmix64 over the index), so
// any offset can be generated on its own.
func streamWord(seed, i uint64) uint64 {
	z := seed + (i+1)*0x9E3779B97F4A7C15
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// fillStream writes the stream's bytes [off, off+len(b)) into b.
func fillStream(seed, off uint64, b []byte) {
	for len(b) > 0 {
		if off%8 == 0 && len(b) >= 8 {
			i := off / 8
			n := len(b) / 8
			for k := range n {
				binary.LittleEndian.PutUint64(b[8*k:], streamWord(seed, i+uint64(k)))
			}
			b = b[8*n:]
			off += uint64(8 * n)
			continue
		}
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], streamWord(seed, off/8))
		n := copy(b, w[off%8:])
		b = b[n:]
		off += uint64(n)
	}
}

// streamVerifier checks a received stream chunk by chunk.
type streamVerifier struct {
	seed    uint64
	off     uint64
	scratch []byte
	// firstBad is the offset of the first wrong byte; -1 while none.
	firstBad int64
}

func newStreamVerifier(seed uint64) *streamVerifier {
	return &streamVerifier{seed: seed, firstBad: -1}
}

// check compares p with the stream at the current offset and advances.
func (v *streamVerifier) check(p []byte) {
	if v.firstBad < 0 {
		if cap(v.scratch) < len(p) {
			v.scratch = make([]byte, max(len(p), 64<<10))
		}
		want := v.scratch[:len(p)]
		fillStream(v.seed, v.off, want)
		if !bytes.Equal(want, p) {
			for i := range p {
				if p[i] != want[i] {
					v.firstBad = int64(v.off) + int64(i)
					break
				}
			}
		}
	}
	v.off += uint64(len(p))
}
