package proxyproto

import "errors"

var (
	// ErrNeedMore means the bytes so far are a valid beginning of a header
	// but too short to decide: read more and call Parse again with all of
	// them.
	ErrNeedMore = errors.New("proxyproto: need more bytes")

	// ErrInvalid is wrapped by every error saying the bytes are not a valid
	// PROXY header (and never will be, whatever follows): drop the
	// connection.
	ErrInvalid = errors.New("proxyproto: invalid header")
)

// invalidError is an ErrInvalid naming what was wrong. The values are
// package-level so that refusing a header does not allocate either.
type invalidError struct{ what string }

func (e *invalidError) Error() string { return "proxyproto: invalid header: " + e.what }
func (e *invalidError) Unwrap() error { return ErrInvalid }

func invalid(what string) error { return &invalidError{what} }

var (
	errSignature = invalid("bad signature (neither \"PROXY \" nor the v2 signature)")

	errV1Protocol  = invalid("v1: unknown protocol (want TCP4, TCP6 or UNKNOWN)")
	errV1TooLong   = invalid("v1: no CRLF within 107 bytes")
	errV1BareCRLF  = invalid("v1: line ends with a lone CR or LF, not CRLF")
	errV1Separator = invalid("v1: want exactly one space between fields")
	errV1SrcAddr   = invalid("v1: bad source address")
	errV1DstAddr   = invalid("v1: bad destination address")
	errV1SrcPort   = invalid("v1: bad source port (want 0-65535, no leading zeroes)")
	errV1DstPort   = invalid("v1: bad destination port (want 0-65535, no leading zeroes)")
	errV1End       = invalid("v1: want CRLF after the destination port")
	errV1Fields    = invalid("v1: line ends before the addresses and ports")

	errV2Version   = invalid("v2: unknown version (want 2)")
	errV2Command   = invalid("v2: unknown command (want LOCAL or PROXY)")
	errV2Family    = invalid("v2: unknown address family")
	errV2Transport = invalid("v2: unknown transport protocol")
	errV2TooLong   = invalid("v2: header length over the limit (MaxV2Length)")
	errV2Short     = invalid("v2: header length shorter than its address block")
	errV2TLV       = invalid("v2: TLV runs past the end of the header")
)
