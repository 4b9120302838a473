package clienthello

import "golang.org/x/crypto/cryptobyte"

// helloBuilder writes ClientHello messages field by field, for the cases
// no real client sends.
type helloBuilder struct {
	version                        uint16
	sessionID, suites, compression []byte
	exts                           bool // an extension block, even if empty
}

// with returns the handshake message, header included, with extensions.
func (hb helloBuilder) with(exts ...[]byte) []byte {
	var b cryptobyte.Builder
	b.AddUint8(handshakeTypeClientHello)
	b.AddUint24LengthPrefixed(func(b *cryptobyte.Builder) {
		b.AddUint16(hb.version)
		b.AddBytes(make([]byte, 32))
		b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(hb.sessionID) })
		b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(hb.suites) })
		b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(hb.compression) })
		if hb.exts || len(exts) > 0 {
			b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
				for _, e := range exts {
					b.AddBytes(e)
				}
			})
		}
	})
	return b.BytesOrPanic()
}

// fixLength sets msg's handshake length to what follows its header.
func fixLength(msg []byte) []byte {
	n := len(msg) - handshakeHeaderLen
	msg[1], msg[2], msg[3] = byte(n>>16), byte(n>>8), byte(n)
	return msg
}

// ext is an extension of type typ and data.
func ext(typ uint16, data []byte) []byte {
	var b cryptobyte.Builder
	b.AddUint16(typ)
	b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(data) })
	return b.BytesOrPanic()
}

// sni is a ServerNameList of (name type, name) pairs: typ, name, typ, name...
func sni(pairs ...any) []byte {
	var b cryptobyte.Builder
	b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
		for i := 0; i < len(pairs); i += 2 {
			b.AddUint8(uint8(pairs[i].(int)))
			b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes([]byte(pairs[i+1].(string))) })
		}
	})
	return b.BytesOrPanic()
}

// alpn is a ProtocolNameList.
func alpn(protos ...string) []byte {
	var b cryptobyte.Builder
	b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
		for _, p := range protos {
			b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes([]byte(p)) })
		}
	})
	return b.BytesOrPanic()
}
