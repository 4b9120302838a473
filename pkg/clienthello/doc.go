// Package clienthello reads the TLS ClientHello at the start of a
// connection, for an event loop that routes on the server name without
// terminating TLS.
//
// Its one job is Inspect: given every byte a client has sent so far, from
// the first, say "need more" (a valid prefix, read again), "here is the
// hello" (its server name, ALPN protocols, ECH presence, versions), or why
// it never will be: not TLS, malformed TLS, or too large. It does no I/O,
// starts no goroutines, never keeps, consumes or changes the bytes (the
// relay sends them to the backend as they came), and does not allocate
// until it has the whole hello. It decides as early as the bytes allow: a
// client speaking some other protocol is told apart by its first byte or
// two, a hello that cannot fit by its record and handshake headers. Every
// length is checked through golang.org/x/crypto/cryptobyte. An event loop
// inspects through a Reader of its own (reader.go), which interns the
// names it has seen and reuses its memory, so that a hello naming a known
// server costs no allocation at all.
//
// The framing is TLS's record layer (RFC 8446 section 5.1, RFC 5246
// section 6.2): a ClientHello is one handshake message, which a client may
// cut into the payloads of several handshake records (content type 22),
// and which TCP may cut anywhere again. Inspect puts the message back
// together from the record payloads. Where the specifications leave a
// choice to the receiver, or peers differ, this package decides so:
//
//   - Size. The hello message, its 4-byte handshake header included, may
//     be up to MaxHelloLen (2^14 bytes, what one record carries at most and
//     the bound BoringSSL, and with it Envoy's tls_inspector, keeps); the
//     records carrying it may take up to MaxBytes (17,408 bytes: that plus
//     1,024 bytes of record headers, enough for a largest hello cut into
//     records of 81 bytes or more, or a 1.5 KB hello cut into 1-byte
//     records). Past either, TooLarge, said as soon as the headers show it
//     (a handshake length over the bound is known from the first 9 bytes).
//   - Records. Each must be a handshake record of major version 3 (the
//     minor, legacy_record_version, is ignored as RFC 8446 asks), with a
//     payload of 1 to 2^14 bytes: a zero-length handshake fragment and an
//     oversized record are protocol violations (Malformed). Anything after
//     the hello's last byte, in its last record or after it (TLS 1.3 early
//     data, a change_cipher_spec), is not looked at: the hello is whole
//     when its bytes are.
//   - First bytes. A connection whose first byte is not 22 is NotTLS, with
//     one exception: a record of another TLS content type (change cipher
//     spec, alert, application data, heartbeat: 20 to 24) with major
//     version 3 is Malformed, since it is a TLS peer out of order rather
//     than another protocol (and counting it apart tells an operator TLS is
//     breaking). A first byte of 22 with a major version other than 3 is
//     NotTLS. A record of another type between the hello's fragments is
//     Malformed (RFC 8446 forbids interleaving).
//   - SSLv2-compatible hellos (a first byte with the high bit set) are
//     NotTLS: they cannot carry extensions, so no server name, and servers
//     of today refuse them.
//   - The handshake message must be a client_hello (type 1) of at least
//     the fixed fields' 41 bytes, else Malformed. Its body is judged once
//     all its declared bytes are in: version, random, a session id of at
//     most 32 bytes, a non-empty even list of cipher suites, a non-empty
//     list of compression methods, then no extensions at all (old clients)
//     or an extension block that ends exactly where the message does.
//     Duplicate extensions are Malformed (RFC 8446 section 4.2), as in Go's
//     crypto/tls.
//   - server_name (RFC 6066): a non-empty list; entries of types other
//     than host_name are skipped; two host_names are Malformed. The name is
//     lowercased and one trailing dot dropped (RFC 6066 forbids it, Go's
//     server refuses it; routing on the name is still the right thing). An
//     IP literal, which RFC 6066 forbids, is ignored: ServerName is "" as
//     if the client had sent none, so the connection goes where nameless
//     ones go and an address is never matched against a name route. A
//     name of other bytes than letters, digits, '-', '_' and '.', with an
//     empty label, a label over 63 bytes or over 253 bytes in all is
//     Malformed: it can name no host, and it never reaches a log line.
//   - application_layer_protocol_negotiation (RFC 7301): a non-empty list
//     of non-empty names, kept in order, as bytes (RFC 7301 makes them
//     opaque).
//   - encrypted_client_hello (draft-ietf-tls-esni, 0xfe0d): only its
//     presence is reported; the server name is then the outer, public one,
//     and routing on it is what ECH asks of a client-facing relay.
//   - supported_versions (RFC 8446 section 4.2.1): a non-empty even list,
//     reported in order.
//
// Other extensions are skipped unread.
package clienthello
