package accesslog

import (
	"strconv"
	"time"
	"unicode/utf8"
)

// Formats accepted in [log] access (besides "off").
const (
	FormatText = "text"
	FormatJSON = "json"
)

// timeLayout is RFC 3339 in UTC with microseconds.
const timeLayout = "2006-01-02T15:04:05.000000Z07:00"

// maxLine bounds one formatted line: names are at most 64 bytes,
// addresses at most 47, numbers 20 digits, a TLS server name 255 bytes
// (each escaped byte of it up to 6); the keys and punctuation come to
// about 250.
const maxLine = 2560

// AppendJSON appends r as one JSON object and a newline:
//
//	{"time":"2024-05-01T12:00:00.000123Z","listener":"web","pool":"web",
//	 "client":"192.0.2.7:51234","backend":"10.0.0.1:8080","to_backend":64,
//	 "to_client":1024,"duration":0.003512,"reason":"completed","result":"ok",
//	 "event":"close","proto":"tcp"}
//
// backend is "" for a client that never reached one; duration is in
// seconds. Every client of a listener with SNI routes (Record.Routed)
// also has "route" ("" for the listener's own pool) and "server_name"
// (its ClientHello's, "" when none) after "result". Every record ends
// with "event" (close, connect, interim) and "proto" (tcp, udp); a UDP
// session's then has "datagrams_to_backend" and "datagrams_to_client".
// Fields are only ever appended, so a parser of an older format reads
// these lines as before.
func AppendJSON(b []byte, r *Record) []byte {
	b = append(b, `{"time":"`...)
	b = time.Unix(0, r.End).UTC().AppendFormat(b, timeLayout)
	b = append(b, `","listener":`...)
	b = appendJSONString(b, r.Listener)
	b = append(b, `,"pool":`...)
	b = appendJSONString(b, r.Pool)
	b = append(b, `,"client":"`...)
	b = r.Client.AppendTo(b)
	b = append(b, `","backend":`...)
	b = appendJSONString(b, r.Backend)
	b = append(b, `,"to_backend":`...)
	b = strconv.AppendInt(b, r.ToBackend, 10)
	b = append(b, `,"to_client":`...)
	b = strconv.AppendInt(b, r.ToClient, 10)
	b = append(b, `,"duration":`...)
	b = appendSeconds(b, r.Duration)
	b = append(b, `,"reason":"`...)
	b = append(b, r.Reason...)
	b = append(b, `","result":"`...)
	b = append(b, r.Result...)
	b = append(b, '"')
	if r.Routed || r.Route != "" || r.ServerName != "" {
		b = append(b, `,"route":`...)
		b = appendJSONString(b, r.Route)
		b = append(b, `,"server_name":`...)
		b = appendJSONString(b, r.ServerName)
	}
	b = append(b, `,"event":"`...)
	b = append(b, r.Event.String()...)
	if !r.UDP {
		return append(b, `","proto":"tcp"}`+"\n"...)
	}
	b = append(b, `","proto":"udp","datagrams_to_backend":`...)
	b = strconv.AppendInt(b, r.DatagramsToBackend, 10)
	b = append(b, `,"datagrams_to_client":`...)
	b = strconv.AppendInt(b, r.DatagramsToClient, 10)
	return append(b, "}\n"...)
}

// AppendText appends r as one logfmt line (the process log's text format)
// with the keys and values of AppendJSON:
//
//	time=2024-05-01T12:00:00.000123Z listener=web pool=web
//	 client=192.0.2.7:51234 backend=10.0.0.1:8080 to_backend=64
//	 to_client=1024 duration=0.003512 reason=completed result=ok
//	 event=close proto=tcp
//
// An empty value (backend, for a client that never reached one; reason
// and result, for a connection still open) is written "".
func AppendText(b []byte, r *Record) []byte {
	b = append(b, "time="...)
	b = time.Unix(0, r.End).UTC().AppendFormat(b, timeLayout)
	b = append(b, " listener="...)
	b = appendTextValue(b, r.Listener)
	b = append(b, " pool="...)
	b = appendTextValue(b, r.Pool)
	b = append(b, " client="...)
	b = r.Client.AppendTo(b)
	b = append(b, " backend="...)
	b = appendTextValue(b, r.Backend)
	b = append(b, " to_backend="...)
	b = strconv.AppendInt(b, r.ToBackend, 10)
	b = append(b, " to_client="...)
	b = strconv.AppendInt(b, r.ToClient, 10)
	b = append(b, " duration="...)
	b = appendSeconds(b, r.Duration)
	b = append(b, " reason="...)
	b = appendTextValue(b, r.Reason)
	b = append(b, " result="...)
	b = appendTextValue(b, r.Result)
	if r.Route != "" || r.ServerName != "" {
		b = append(b, " route="...)
		b = appendTextValue(b, r.Route)
		b = append(b, " server_name="...)
		b = appendTextValue(b, r.ServerName)
	}
	// A TCP connection's close line stays the line it was before events
	// and UDP records existed, byte for byte (scripts anchor on its
	// end): event is written when it is not close, proto when it is udp.
	if r.Event != EventClose {
		b = append(b, " event="...)
		b = append(b, r.Event.String()...)
	}
	if !r.UDP {
		return append(b, '\n')
	}
	b = append(b, " proto=udp datagrams_to_backend="...)
	b = strconv.AppendInt(b, r.DatagramsToBackend, 10)
	b = append(b, " datagrams_to_client="...)
	b = strconv.AppendInt(b, r.DatagramsToClient, 10)
	return append(b, '\n')
}

func appendSeconds(b []byte, d time.Duration) []byte {
	return strconv.AppendFloat(b, d.Seconds(), 'f', 6, 64)
}

// appendTextValue writes s bare when it can be, quoted (Go syntax, as
// slog's text handler does) when it is empty or holds a space, a quote, an
// '=' or anything not printable.
func appendTextValue(b []byte, s string) []byte {
	if s == "" {
		return append(b, `""`...)
	}
	for _, c := range []byte(s) {
		if c <= ' ' || c == '"' || c == '=' || c >= utf8.RuneSelf || c == 0x7f {
			return strconv.AppendQuote(b, s)
		}
	}
	return append(b, s...)
}

// appendJSONString writes s as a JSON string. Names and addresses are
// plain ASCII by the config's rules; anything else is escaped all the
// same.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				b = append(b, `\ufffd`...)
			} else {
				b = append(b, s[i:i+size]...)
			}
			i += size
			continue
		}
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < ' ':
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			b = append(b, c)
		}
		i++
	}
	return append(b, '"')
}
