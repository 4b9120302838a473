package proxyproto

// A v1 header is one line:
//
//	PROXY TCP4 <src> <dst> <sport> <dport>\r\n
//	PROXY TCP6 <src> <dst> <sport> <dport>\r\n
//	PROXY UNKNOWN[ <anything but CR and LF>]\r\n
//
// parseV1 checks each byte as it comes, so that a line that goes wrong is
// refused at the first byte that makes it wrong, not at its end.

func parseV1(b []byte) (Header, int, error) {
	line := b[:min(len(b), MaxV1Length)]
	h, n, err := parseV1Line(line)
	if err == ErrNeedMore && len(line) == MaxV1Length {
		err = errV1TooLong
	}
	return h, n, err
}

func parseV1Line(b []byte) (Header, int, error) {
	if done, ok := matchPrefix(b, "PROXY "); !ok {
		return Header{}, 0, errSignature
	} else if !done {
		return Header{}, 0, ErrNeedMore
	}
	proto := b[6:]
	var v6 bool
	if done, ok := matchPrefix(proto, "TCP4"); ok {
		if !done {
			return Header{}, 0, ErrNeedMore
		}
	} else if done, ok := matchPrefix(proto, "TCP6"); ok {
		if !done {
			return Header{}, 0, ErrNeedMore
		}
		v6 = true
	} else if done, ok := matchPrefix(proto, "UNKNOWN"); ok {
		if !done {
			return Header{}, 0, ErrNeedMore
		}
		return parseV1Unknown(b, 6+len("UNKNOWN"))
	} else {
		return Header{}, 0, errV1Protocol
	}

	i := 6 + len("TCP4")
	if i == len(b) {
		return Header{}, 0, ErrNeedMore
	}
	switch b[i] {
	case ' ':
	case '\r', '\n':
		return Header{}, 0, errV1Fields
	default:
		return Header{}, 0, errV1Protocol
	}
	i++

	addrKind := fieldIPv4
	if v6 {
		addrKind = fieldIPv6
	}
	// Each field is checked as soon as it ends, and while it is still
	// arriving, so that the first wrong byte is refused.
	f, i, err := v1Field(b, i, addrKind, ' ', errV1SrcAddr)
	if err != nil {
		return Header{}, 0, err
	}
	src, ok := parseAddr(f, v6)
	if !ok {
		return Header{}, 0, errV1SrcAddr
	}
	f, i, err = v1Field(b, i, addrKind, ' ', errV1DstAddr)
	if err != nil {
		return Header{}, 0, err
	}
	dst, ok := parseAddr(f, v6)
	if !ok {
		return Header{}, 0, errV1DstAddr
	}
	f, i, err = v1Field(b, i, fieldPort, ' ', errV1SrcPort)
	if err != nil {
		return Header{}, 0, err
	}
	sport, ok := parsePort(f, false)
	if !ok {
		return Header{}, 0, errV1SrcPort
	}
	f, i, err = v1Field(b, i, fieldPort, '\r', errV1DstPort)
	if err != nil {
		return Header{}, 0, err
	}
	dport, ok := parsePort(f, false)
	if !ok {
		return Header{}, 0, errV1DstPort
	}
	if i == len(b) {
		return Header{}, 0, ErrNeedMore
	}
	if b[i] != '\n' {
		return Header{}, 0, errV1BareCRLF
	}
	return Header{
		Version:   1,
		Transport: Stream,
		Src:       addrPort(src, sport),
		Dst:       addrPort(dst, dport),
	}, i + 1, nil
}

// parseV1Unknown reads the rest of an UNKNOWN line from b[i:], just past
// "UNKNOWN": either CRLF at once or a space and anything up to the CRLF.
func parseV1Unknown(b []byte, i int) (Header, int, error) {
	if i == len(b) {
		return Header{}, 0, ErrNeedMore
	}
	switch b[i] {
	case '\r':
	case '\n':
		return Header{}, 0, errV1BareCRLF
	case ' ':
		for i++; i < len(b) && b[i] != '\r'; i++ {
			if b[i] == '\n' {
				return Header{}, 0, errV1BareCRLF
			}
		}
		if i == len(b) {
			return Header{}, 0, ErrNeedMore
		}
	default:
		return Header{}, 0, errV1Protocol
	}
	// b[i] is '\r'.
	if i+1 == len(b) {
		return Header{}, 0, ErrNeedMore
	}
	if b[i+1] != '\n' {
		return Header{}, 0, errV1BareCRLF
	}
	return Header{Version: 1, Local: true}, i + 2, nil
}

// The kinds of v1 fields.
const (
	fieldIPv4 = iota
	fieldIPv6
	fieldPort
)

var fieldClass = [...]uint8{fieldIPv4: classV4, fieldIPv6: classV6, fieldPort: classDigit}

// fieldMax is the longest text of each kind of field; the IPv6 one has a
// dotted IPv4 tail (INET6_ADDRSTRLEN-1).
var fieldMax = [...]int{
	fieldIPv4: len("255.255.255.255"),
	fieldIPv6: len("ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255"),
	fieldPort: len("65535"),
}

// v1Field reads the field of kind starting at b[i], up to term, and returns
// it with the index just past term; the caller checks the whole field.
// Otherwise the field so far must be a valid beginning (else bad): if it runs
// to the end of b that is ErrNeedMore, and a byte that cannot continue it is
// an error at once, bad or a more precise one when the byte is a space or a
// line end in the wrong place. So the error a line gets is that of its first
// wrong byte, whatever follows.
func v1Field(b []byte, i int, kind int, term byte, bad error) ([]byte, int, error) {
	class, max := fieldClass[kind], fieldMax[kind]
	j := i
	for j < len(b) && charClass[b[j]]&class != 0 {
		j++
		if j-i > max {
			return nil, 0, bad
		}
	}
	if j < len(b) && b[j] == term && j > i {
		return b[i:j], j + 1, nil
	}
	if !fieldPrefix(b[i:j], kind) {
		return nil, 0, bad
	}
	if j == len(b) {
		return nil, 0, ErrNeedMore
	}
	switch c := b[j]; {
	case c == ' ' && j == i:
		return nil, 0, errV1Separator
	case c == ' ' && term == '\r':
		return nil, 0, errV1End
	case c == '\n':
		return nil, 0, errV1BareCRLF
	case c == '\r' && term == ' ':
		return nil, 0, errV1Fields
	}
	return nil, 0, bad
}

// fieldPrefix reports whether s can begin a valid field of kind.
func fieldPrefix(s []byte, kind int) bool {
	switch kind {
	case fieldIPv4:
		_, ok := ipv4(s, true)
		return ok
	case fieldIPv6:
		_, ok := ipv6(s, true)
		return ok
	}
	_, ok := parsePort(s, true)
	return ok
}

// parsePort reads a decimal port: 1 to 5 digits, no leading zero, at most
// 65535. With partial, s need only be the beginning of one.
func parsePort(s []byte, partial bool) (uint16, bool) {
	if (len(s) == 0 && !partial) || len(s) > 5 || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	v := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int(c-'0')
	}
	if v > 65535 {
		return 0, false
	}
	return uint16(v), true
}

// Character classes of v1 fields, as bits of charClass.
const (
	classDigit uint8 = 1 << iota // a port
	classV4                      // an IPv4 address
	classV6                      // an IPv6 address (with an optional dotted tail)
)

var charClass = func() (t [256]uint8) {
	for c := '0'; c <= '9'; c++ {
		t[c] = classDigit | classV4 | classV6
	}
	for _, c := range "abcdefABCDEF:" {
		t[c] = classV6
	}
	t['.'] = classV4 | classV6
	return t
}()
