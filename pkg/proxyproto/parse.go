package proxyproto

// Parse reads one PROXY header (v1 or v2) from the start of b, the bytes
// received on the connection so far.
//
// It returns the header and its length in bytes (the application data starts
// at b[n:]); or ErrNeedMore when b is a valid beginning of a header that is
// too short to decide; or an error wrapping ErrInvalid naming what is wrong.
// Bytes that cannot begin a valid header are refused at once, without waiting
// for more: a first byte other than 'P' or '\r' is invalid by itself.
//
// Parse never returns ErrNeedMore once len(b) >= MaxLength. It does not
// allocate and does not retain b.
func Parse(b []byte) (Header, int, error) {
	return ParseLimit(b, MaxV2Length)
}

// ParseLimit is Parse with maxV2 instead of MaxV2Length as the longest v2
// header accepted (fixed part included; the format's own limit is 16+65535).
// v1 lines are bounded by MaxV1Length whatever maxV2 says, so ParseLimit
// decides within max(maxV2, MaxV1Length) bytes.
func ParseLimit(b []byte, maxV2 int) (Header, int, error) {
	if len(b) == 0 {
		return Header{}, 0, ErrNeedMore
	}
	switch b[0] {
	case 'P':
		return parseV1(b)
	case v2Signature[0]:
		return parseV2(b, maxV2)
	}
	return Header{}, 0, errSignature
}

// matchPrefix compares the start of b with lit. It reports whether all of
// lit is there (done) and whether what is there agrees with lit (ok).
func matchPrefix(b []byte, lit string) (done, ok bool) {
	n := min(len(b), len(lit))
	return n == len(lit), string(b[:n]) == lit[:n]
}
