package clienthello

// Verdict is what Inspect makes of the bytes so far.
type Verdict int

const (
	// NeedMore: a valid prefix of a ClientHello; call again with more.
	NeedMore Verdict = iota
	// Complete: the whole ClientHello is in, and Inspect's Hello is it.
	Complete
	// NotTLS: the first bytes are not a TLS handshake record (plain HTTP,
	// an SSH client's banner, an SSLv2-compatible hello).
	NotTLS
	// Malformed: TLS framing, but broken or out of order.
	Malformed
	// TooLarge: the ClientHello cannot fit in MaxHelloLen, or its records
	// in MaxBytes.
	TooLarge
)

// String names the verdict for metrics labels and logs.
func (v Verdict) String() string {
	switch v {
	case NeedMore:
		return "need_more"
	case Complete:
		return "complete"
	case NotTLS:
		return "not_tls"
	case Malformed:
		return "malformed"
	case TooLarge:
		return "too_large"
	}
	return "unknown"
}
