// Package sniroute chooses the route of a TCP listener for a TLS
// connection, from the server name (SNI) and the application protocols
// (ALPN) its ClientHello offers. It reads no bytes itself: the relay's
// inspection hands it what the ClientHello says, and the index it returns
// names one of the listener's [[listener.route]] tables.
//
// A route matches a connection when one of its names matches the server
// name and, when the route lists protocols (alpn), the client offers at
// least one of them. Names are compared without regard to ASCII case and
// without a trailing dot. A name is exact ("api.example.com") or a
// wildcard of one whole leftmost label ("*.example.com" matches
// "a.example.com", not "example.com" nor "a.b.example.com"). Case is
// folded for ASCII letters only, as a server name is ASCII; a server name
// longer than a DNS name (253 bytes) matches nothing.
//
// Among the routes that match, the most specific wins:
//
//  1. a route matching by an exact name beats one matching by a wildcard;
//  2. at the same name, a route with an alpn condition beats one without;
//  3. among routes with alpn at the same name, the one listing the
//     protocol the client prefers most (the first of its ALPN list that a
//     route names) wins.
//
// These order every pair of matching routes except two, which Check
// refuses: one name in two routes without alpn, and one name in two
// routes whose alpn lists share a protocol. A name can match a server
// name only through one pattern of each kind (the exact name, and the
// wildcard of the name without its first label), so nothing else ties.
//
// New builds a Matcher once, when a configuration is loaded; Match is then
// two map lookups (the exact name, then the wildcard suffix) and a scan of
// the few protocols listed for that name: allocation-free and independent
// of the number of routes (BenchmarkMatch, 1,000 routes).
//
// Names follow RFC 6066's HostName: a DNS host name, no IP literal (a TLS
// client sends no server name for an address). Labels are letters, digits,
// '-' (not first or last) and '_' (in real internal names, and harmless to
// compare); a non-ASCII name is written in its xn-- form, as clients send
// it. ECH: the server name seen is the ClientHelloOuter's public name, so
// routes name public names.
package sniroute
