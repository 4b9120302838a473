package syslog

import (
	"strconv"
	"time"
	"unicode/utf8"
)

// AppName is RFC 5424's APP-NAME, and the local format's tag.
const AppName = "l4lb"

// TruncatedMarker ends a message cut to its transport's bound.
const TruncatedMarker = "...[truncated]"

// Message bounds, header included (the package doc says why these).
const (
	MaxUnixgram = 8192
	MaxUDP      = 4096
)

// rfc3339Micro is RFC 5424's TIMESTAMP as written here: UTC, microseconds
// (TIME-SECFRAC takes at most 6 digits).
const rfc3339Micro = "2006-01-02T15:04:05.000000Z07:00"

// header is what every message of one writer shares: the fields that do
// not change from one message to the next, checked once.
type header struct {
	format   string
	facility Facility
	hostname string // RFC 5424 HOSTNAME, "-" when unknown
	procid   string
	msgid    string // "-" when none
}

// appendMessage appends one message: sev's PRI, the header, body (a
// trailing newline dropped), cut to limit bytes with TruncatedMarker.
func (h *header) appendMessage(b []byte, sev Severity, t time.Time, body []byte, limit int) []byte {
	start := len(b)
	b = append(b, '<')
	b = strconv.AppendUint(b, uint64(h.facility)*8+uint64(sev&7), 10)
	b = append(b, '>')
	if h.format == FormatLocal {
		b = t.Local().AppendFormat(b, time.Stamp)
		b = append(b, ' ')
		b = append(b, AppName...)
		b = append(b, '[')
		b = append(b, h.procid...)
		b = append(b, "]: "...)
	} else {
		b = append(b, "1 "...)
		b = t.UTC().AppendFormat(b, rfc3339Micro)
		b = append(b, ' ')
		b = append(b, h.hostname...)
		b = append(b, ' ')
		b = append(b, AppName...)
		b = append(b, ' ')
		b = append(b, h.procid...)
		b = append(b, ' ')
		b = append(b, h.msgid...)
		b = append(b, " - "...)
	}
	if n := len(body); n > 0 && body[n-1] == '\n' {
		body = body[:n-1]
	}
	room := limit - (len(b) - start)
	if len(body) <= room {
		return append(b, body...)
	}
	cut := max(room-len(TruncatedMarker), 0)
	for cut > 0 && !utf8.RuneStart(body[cut]) {
		cut--
	}
	b = append(b, body[:cut]...)
	return append(b, TruncatedMarker...)
}

// printable keeps what RFC 5424 allows in a header field (PRINTUSASCII,
// at most n bytes), "-" (NILVALUE) when nothing is left.
func printable(s string, n int) string {
	out := make([]byte, 0, min(len(s), n))
	for i := 0; i < len(s) && len(out) < n; i++ {
		if c := s[i]; c > ' ' && c < 0x7f {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return "-"
	}
	return string(out)
}
