package clienthello

import "golang.org/x/crypto/cryptobyte"

const (
	// MaxHelloLen is the largest ClientHello accepted, in bytes, its 4-byte
	// handshake header included: what one record carries at most (2^14).
	MaxHelloLen = 1 << 14
	// MaxBytes is the most bytes Inspect looks at: a hello of MaxHelloLen
	// and 1,024 bytes of record headers (17,408). A hello whose records end
	// past it is TooLarge; given MaxBytes bytes, Inspect never needs more.
	MaxBytes = MaxHelloLen + 1024
)

const (
	recordHeaderLen    = 5 // content type, legacy_record_version, length
	maxRecordPayload   = 1 << 14
	handshakeHeaderLen = 4 // msg_type, 24-bit length
	// minHelloBody is the fixed fields with the least they can hold:
	// version, random, an empty session id, one cipher suite, one
	// compression method.
	minHelloBody = 2 + 32 + 1 + 2 + 2 + 1 + 1

	contentTypeChangeCipherSpec = 20
	contentTypeHeartbeat        = 24
	contentTypeHandshake        = 22
	handshakeTypeClientHello    = 1
)

// Inspect looks at the first bytes of a connection, everything received
// so far from the first byte, and says whether they hold a whole
// ClientHello (Complete, with h filled), a valid prefix of one (NeedMore),
// or never will (NotTLS, Malformed, TooLarge). It neither keeps nor
// changes b, and allocates only once the hello is whole. A verdict other
// than NeedMore stays the same whatever bytes follow; given MaxBytes
// bytes or more, the verdict is never NeedMore.
func Inspect(b []byte) (Verdict, Hello) {
	var r Reader
	return r.Inspect(b)
}

// Inspect is the package's Inspect, reusing what r kept from the hellos
// before (reader.go).
func (r *Reader) Inspect(b []byte) (Verdict, Hello) {
	v, f := frame(b, nil)
	if v != Complete {
		return v, Hello{}
	}
	var body []byte
	if f.records == 1 {
		start := recordHeaderLen + handshakeHeaderLen
		body = b[start : start+f.bodyLen]
	} else {
		body = r.bodyOf(f.bodyLen)
		frame(b, body)
	}
	h, ok := r.parseHello(body)
	if !ok {
		return Malformed, Hello{}
	}
	h.WireLen = f.end
	return Complete, h
}

// framing is what frame learnt of a whole hello: its body's length, the
// records that carried it and where in b its last byte ends.
type framing struct {
	bodyLen, records, end int
}

// frame walks the handshake records at the start of b and the hello
// message in their payloads, checking every header, until the message is
// whole (Complete) or a verdict is certain. With dst non-nil (of the
// body's length, known from a first walk), it copies the body into dst.
func frame(b []byte, dst []byte) (Verdict, framing) {
	var f framing
	var hs [handshakeHeaderLen]byte
	hsN, got := 0, 0 // handshake header bytes and body bytes seen
	bodyLen := -1
	for off := 0; ; {
		if off+recordHeaderLen >= MaxBytes {
			return TooLarge, f // no room left for a record with a payload
		}
		rest := cryptobyte.String(b[off:])
		var typ, major, minor uint8
		var length uint16
		if !rest.ReadUint8(&typ) {
			return NeedMore, f
		}
		if off == 0 && typ != contentTypeHandshake && (typ < contentTypeChangeCipherSpec || typ > contentTypeHeartbeat) {
			return NotTLS, f
		}
		if !rest.ReadUint8(&major) {
			return NeedMore, f
		}
		switch {
		case major != 3 && off == 0:
			return NotTLS, f
		case major != 3, typ != contentTypeHandshake:
			return Malformed, f
		}
		if !rest.ReadUint8(&minor) || !rest.ReadUint16(&length) {
			return NeedMore, f
		}
		if length == 0 || length > maxRecordPayload {
			return Malformed, f
		}
		f.records++
		var payload cryptobyte.String
		if !rest.ReadBytes((*[]byte)(&payload), int(length)) {
			payload = rest // the record so far
		}
		avail := len(payload)
		for hsN < handshakeHeaderLen && payload.ReadUint8(&hs[hsN]) {
			hsN++
		}
		if hsN == handshakeHeaderLen && bodyLen < 0 {
			var msgType uint8
			var n uint32
			hdr := cryptobyte.String(hs[:])
			hdr.ReadUint8(&msgType)
			hdr.ReadUint24(&n)
			switch {
			case msgType != handshakeTypeClientHello, n < minHelloBody:
				return Malformed, f
			case n > MaxHelloLen-handshakeHeaderLen:
				return TooLarge, f
			}
			bodyLen = int(n)
		}
		if bodyLen < 0 {
			if avail < int(length) {
				return NeedMore, f
			}
			off += recordHeaderLen + int(length)
			continue
		}
		var part []byte
		payload.ReadBytes(&part, min(bodyLen-got, len(payload))) // at most what is there: it reads
		if dst != nil {
			copy(dst[got:], part)
		}
		got += len(part)
		used := avail - len(payload) // of this record's payload
		if got == bodyLen {
			f.bodyLen, f.end = bodyLen, off+recordHeaderLen+used
			return Complete, f
		}
		if minEnd(off, int(length), used, bodyLen-got) > MaxBytes {
			return TooLarge, f
		}
		if avail < int(length) {
			return NeedMore, f
		}
		off += recordHeaderLen + int(length)
	}
}

// minEnd is the earliest a hello can end, as an offset into the
// connection's bytes, when remaining of its bytes are yet to come, the
// record at off declares length bytes and used of them have been seen:
// in the rest of this record, or after at least one more record header.
func minEnd(off, length, used, remaining int) int {
	left := length - used
	if remaining <= left {
		return off + recordHeaderLen + used + remaining
	}
	return off + recordHeaderLen + length + recordHeaderLen + remaining - left
}
