// Package proxyproto reads and writes HAProxy PROXY protocol headers,
// version 1 (a text line) and version 2 (binary), for an event loop.
//
// Its one job is to turn the first bytes of a connection into the original
// source and destination they announce (Parse), and addresses into the header
// to put in front of a connection to a backend (AppendV1, AppendV2,
// AppendV2Local). It does no I/O, starts no goroutines and never sees a
// net.Conn: Parse looks at the bytes received so far and says either "here is
// the header, it is n bytes long", "need more" (a valid prefix, read again), or
// "invalid" (drop the connection). It decides as early as the bytes allow, so a
// client that speaks some other protocol is refused after its first byte or so
// rather than after a timeout. Parsing and encoding work on caller-provided
// byte slices and do not allocate.
//
// The specification is "The PROXY protocol, Versions 1 & 2" (haproxy
// doc/proxy-protocol.txt, revision 2020/03/05). Where it leaves a choice to
// the receiver, this package decides as follows:
//
//   - v1 "UNKNOWN" (with or without anything after it up to the CRLF), the v2
//     LOCAL command, and a v2 PROXY command whose family or transport is
//     UNSPEC or whose family is AF_UNIX are accepted as Local: they carry no
//     usable address, and the receiver uses the connection's own endpoints.
//     For LOCAL the family byte is ignored, as the specification says.
//   - v1 lines are read strictly: exactly one space between fields, IPv4 as
//     dotted decimal without leading zeroes, ports in [0, 65535] without
//     leading zeroes, and the line ends with CRLF (a lone CR or LF anywhere in
//     the line is refused, also after UNKNOWN). TCP6 addresses may use the
//     dotted IPv4 tail ("::ffff:192.0.2.1") since inet_ntop, and so HAProxy,
//     writes v4-mapped addresses that way; zones ("%eth0") are refused.
//   - IPv4-mapped IPv6 addresses (in TCP6 lines and v2 INET6 blocks) are
//     returned unmapped, as plain IPv4. When writing, a v4/v6 mix is sent as
//     IPv6 with the IPv4 side mapped (::ffff:a.b.c.d), as HAProxy does.
//   - v2 headers longer than MaxV2Length bytes are refused as soon as their
//     16-byte fixed part has arrived (ParseLimit sets another limit), so a
//     connection waiting for its header never holds more than that.
//   - v2 TLVs are not interpreted, but their framing is checked: after the
//     address block, the rest of the header must be a sequence of whole TLVs.
//     The CRC32C TLV is not verified (the specification makes that optional).
package proxyproto
