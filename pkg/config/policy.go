package config

import (
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Traffic policy (issue 14): who may connect (allow, deny), how much one
// client may take (max_connections_per_source, rate_per_source), the PROXY
// protocol on either side, TCP keepalive on either side, a cap per backend
// with a queue in front of it, and a state file for runtime changes.

// PROXY protocol versions accepted in [pool.NAME] proxy_protocol.
const (
	ProxyProtocolOff = "off"
	ProxyProtocolV1  = "v1" // text; TCP pools only (it has no datagram form)
	ProxyProtocolV2  = "v2" // binary; TCP and UDP pools
)

// ProxyProtocols lists the accepted [pool.NAME] proxy_protocol values.
func ProxyProtocols() []string {
	return []string{ProxyProtocolOff, ProxyProtocolV1, ProxyProtocolV2}
}

// KeepaliveOff is the keepalive keys' default: no TCP keepalive.
const KeepaliveOff = "off"

// DefaultProxyTimeout is a listener's proxy_timeout when the file does not
// set it.
const DefaultProxyTimeout = 3 * time.Second

// Bounds of the traffic-policy keys.
const (
	MinProxyTimeout         = 100 * time.Millisecond
	MaxProxyTimeout         = 60 * time.Second
	MaxConnectionsPerSource = 1_000_000 // max_connections_per_source
	MaxRatePerSource        = 1e6       // rate_per_source, new connections a second
	MaxQueueTimeout         = 60 * time.Second
	MinKeepalive            = time.Second // keepalive (TCP_KEEPIDLE)
	MaxKeepalive            = 2 * time.Hour
	MinKeepaliveInterval    = time.Second // keepalive_interval (TCP_KEEPINTVL), or 0
	MaxKeepaliveInterval    = time.Hour
	MaxKeepaliveCount       = 127       // keepalive_count (TCP_KEEPCNT); the kernel's own bound
	MaxBackendConnections   = 1_000_000 // [[pool.NAME.backend]] max_connections
)

// Defaults of source_ipv4_prefix and source_ipv6_prefix: each IPv4
// address is a source of its own, and each IPv6 /64, the block one host
// may take any address from (SLAAC privacy addresses rotate within it).
const (
	DefaultSourceIPv4Prefix = 32
	DefaultSourceIPv6Prefix = 64
)

// decodeListenerPolicy reads the traffic-policy keys of a [[listener]].
// tcp is false when the listener is known to be UDP: the keys of TCP
// listeners are then refused.
func decodeListenerPolicy(t *table, l *Listener, tcp bool) {
	t.prefixes("allow", &l.Allow)
	t.prefixes("deny", &l.Deny)

	onlyTCP := func(why string) string { return `only for protocol = "tcp" listeners: ` + why }

	// The PROXY protocol, client side.
	noProxy := onlyTCP("a PROXY header is read at the start of a TCP stream (a pool's proxy_protocol sends one to UDP backends)")
	acceptMisplaced := t.misplaced("accept_proxy", tcp, "%s", noProxy)
	trustedMisplaced := t.misplaced("trusted_proxies", tcp, "%s", noProxy)
	timeoutMisplaced := t.misplaced("proxy_timeout", tcp, "%s", noProxy)
	// accept_proxy set but not a boolean is reported: the keys that need
	// it are then judged on their own.
	acceptKnown := !acceptMisplaced
	if v, set := t.m["accept_proxy"]; set {
		_, isBool := v.(bool)
		acceptKnown = acceptKnown && isBool
	}
	if !acceptMisplaced {
		t.boolean("accept_proxy", &l.AcceptProxy)
	}
	notAccepting := "only with accept_proxy = true, and accept_proxy is false"
	if !t.written("accept_proxy") {
		notAccepting += " (accept_proxy left out means false)"
	}
	dependsOnAccept := func(k string) bool {
		return acceptKnown && !l.AcceptProxy && t.misplaced(k, false, "%s", notAccepting)
	}
	if !trustedMisplaced && !dependsOnAccept("trusted_proxies") {
		switch {
		case !t.prefixes("trusted_proxies", &l.TrustedProxies):
		case !acceptKnown || !l.AcceptProxy:
		case !t.written("trusted_proxies"):
			t.c.addAt(t.c.pos.line(t.keyOf("accept_proxy")), t.keyOf("trusted_proxies"), `required with accept_proxy = true: the addresses of the proxies allowed to send a PROXY header, e.g. ["10.0.0.0/8"]; anyone else could claim any client address`)
		case len(l.TrustedProxies) == 0:
			t.c.add(t.keyOf("trusted_proxies"), `must not be empty with accept_proxy = true: name the proxies allowed to send a PROXY header, e.g. ["10.0.0.0/8"]`)
		}
	}
	if !timeoutMisplaced && !dependsOnAccept("proxy_timeout") {
		t.durationIn("proxy_timeout", &l.ProxyTimeout)
	}

	// Limits per client IP.
	noPerSource := onlyTCP("a UDP listener counts sessions, not connections, and caps them with max_sessions")
	connsKnown := false // max_connections_per_source is usable, if only at its default
	if !t.misplaced("max_connections_per_source", tcp, "%s", noPerSource) {
		connsKnown = t.integer("max_connections_per_source", &l.MaxConnsPerSource)
	}
	rateMisplaced := t.misplaced("rate_per_source", tcp, "%s", noPerSource)
	burstMisplaced := t.misplaced("burst_per_source", tcp, "%s", noPerSource)
	rateKnown := false // rate_per_source is usable, if only at its default
	if !rateMisplaced {
		rateKnown = t.number("rate_per_source", &l.RatePerSource)
		if lo, hi := t.spec("rate_per_source").floatRange(); rateKnown && (l.RatePerSource < lo || l.RatePerSource > hi) {
			t.c.add(t.keyOf("rate_per_source"), "%s is out of range: must be 0 (off) or up to %.0f new connections a second", strconv.FormatFloat(l.RatePerSource, 'f', -1, 64), hi)
			rateKnown = false
		}
	}
	if !burstMisplaced {
		noRate := "only with rate_per_source above 0, and rate_per_source is 0 (off)"
		if !t.written("rate_per_source") {
			noRate += " (rate_per_source left out means 0)"
		}
		if !(rateKnown && l.RatePerSource == 0 && t.misplaced("burst_per_source", false, "%s", noRate)) {
			t.integer("burst_per_source", &l.BurstPerSource)
		}
	}
	// Which addresses count as one source for the limits above.
	noLimits := "only with max_connections_per_source or rate_per_source above 0: it says which client addresses share a limit, and no limit is set"
	if !t.written("max_connections_per_source") && !t.written("rate_per_source") {
		noLimits += " (both left out mean 0)"
	}
	limitsOff := rateKnown && connsKnown && l.RatePerSource == 0 && l.MaxConnsPerSource == 0
	for _, k := range []struct {
		name string
		dst  *int
	}{{"source_ipv4_prefix", &l.SourceIPv4Prefix}, {"source_ipv6_prefix", &l.SourceIPv6Prefix}} {
		if t.misplaced(k.name, tcp, "%s", noPerSource) || limitsOff && t.misplaced(k.name, false, "%s", noLimits) {
			continue
		}
		t.integer(k.name, k.dst)
	}

	// TCP keepalive, client side.
	noKeepalive := onlyTCP("UDP has no connection to keep alive")
	decodeKeepalive(t, tcp, func(string) string { return noKeepalive }, &l.Keepalive, &l.KeepaliveInterval, &l.KeepaliveCount)
}

// decodePoolPolicy reads the traffic-policy keys of a [pool.NAME].
func decodePoolPolicy(t *table, p *Pool, use poolUse) {
	if t.oneOf("proxy_protocol", &p.ProxyProtocol, "proxy_protocol setting") &&
		p.ProxyProtocol == ProxyProtocolV1 && use.protocol == ProtocolUDP {
		t.c.add(t.keyOf("proxy_protocol"), `"v1" is for TCP pools, and this pool serves %s: v1 has no datagram form; use "v2" or "off"`, use.what)
	}
	tcp := use.protocol != ProtocolUDP
	if !t.misplaced("queue_timeout", tcp, "%s", use.notFor("queue_timeout", "a datagram is not held for a backend's slot")) {
		t.durationIn("queue_timeout", &p.QueueTimeout)
	}
	notFor := func(k string) string { return use.notFor(k, "UDP has no connection to keep alive") }
	decodeKeepalive(t, tcp, notFor, &p.Keepalive, &p.KeepaliveInterval, &p.KeepaliveCount)
	decodeSources(t, p, tcp, use.notFor("source", "a UDP session's socket takes the address the route gives it"))
}

// decodeKeepalive reads keepalive, keepalive_interval and keepalive_count,
// the TCP keepalive of one side of a relay. Where they do not apply (a UDP
// listener or pool) each is refused with notHere(its name). The interval
// and count are refused while keepalive is off: they would do nothing.
func decodeKeepalive(t *table, applies bool, notHere func(string) string, idle, interval *time.Duration, count *int) {
	idleMisplaced := t.misplaced("keepalive", applies, "%s", notHere("keepalive"))
	intervalMisplaced := t.misplaced("keepalive_interval", applies, "%s", notHere("keepalive_interval"))
	countMisplaced := t.misplaced("keepalive_count", applies, "%s", notHere("keepalive_count"))
	idleKnown := !idleMisplaced && t.keepalive("keepalive", idle)
	off := `only with keepalive on, and keepalive is "off"`
	if !t.written("keepalive") {
		off += ` (keepalive left out means "off")`
	}
	needsIdle := func(k string) bool { return idleKnown && *idle == 0 && t.misplaced(k, false, "%s", off) }
	if !intervalMisplaced && !needsIdle("keepalive_interval") {
		if t.durationIn("keepalive_interval", interval) {
			t.wholeSeconds("keepalive_interval", *interval, "TCP_KEEPINTVL")
		}
	}
	if !countMisplaced && !needsIdle("keepalive_count") {
		t.integer("keepalive_count", count)
	}
}

// keepalive reads a keepalive key: "off" (0) or a duration in the
// schema's range for it (MinKeepalive..MaxKeepalive), of whole seconds.
// Like integer, it reports false only for a present but unusable value.
func (t *table) keepalive(name string, dst *time.Duration) bool {
	lo, hi := t.spec(name).durationRange()
	v, ok := t.get(name)
	if !ok {
		return true
	}
	key := t.keyOf(name)
	s, ok := v.(string)
	if !ok {
		t.c.add(key, `must be "off" or a duration string such as "60s", not %s`, describe(v))
		return false
	}
	if s == KeepaliveOff {
		*dst = 0
		return true
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		t.c.add(key, `%q is neither "off" nor a duration: write "off", or the idle time before the first probe with a unit, e.g. "60s" or "5m"`, s)
		return false
	}
	if d < lo || d > hi {
		t.c.add(key, `%q is out of range: must be "off" or between %v and %v`, s, lo, hi)
		return false
	}
	if !t.wholeSeconds(name, d, "TCP_KEEPIDLE") {
		return false
	}
	*dst = d
	return true
}

// wholeSeconds reports (and returns false for) a duration the kernel
// would round: it takes sockopt, a keepalive time, in seconds.
func (t *table) wholeSeconds(name string, d time.Duration, sockopt string) bool {
	if d%time.Second == 0 {
		return true
	}
	t.c.add(t.keyOf(name), "%v is not a whole number of seconds: the kernel takes %s in seconds; write e.g. %q", d, sockopt, d.Round(time.Second).String())
	return false
}

// durationIn reads a duration in the schema's range for it, lo..hi; hi is
// MaxDuration for a key with a floor only. The key's Zero, when not "",
// says what 0 means, and 0 is then accepted too. Like integer, it reports
// false only for a present but unusable value.
func (t *table) durationIn(name string, dst *time.Duration) bool {
	k := t.spec(name)
	lo, hi := k.durationRange()
	zero := k.Zero
	var d time.Duration
	if !t.anyDuration(name, &d, false) {
		return false
	}
	if !t.written(name) {
		return true
	}
	if d == 0 && zero != "" || d >= lo && d <= hi {
		*dst = d
		return true
	}
	if d > hi && hi >= MaxDuration {
		// A key with a floor only, past every duration's ceiling: in
		// duration's words.
		t.c.add(t.keyOf(name), "%q is too long: at most %v (100 years)", t.m[name], MaxDuration)
		return false
	}
	t.c.add(t.keyOf(name), "%v is out of range: %s", d, durationRangeText(lo, hi, zero))
	return false
}

// durationRangeText says what durationIn accepts, as rangeText does for
// integers.
func durationRangeText(lo, hi time.Duration, zero string) string {
	r := fmt.Sprintf("between %v and %v", lo, hi)
	if hi >= MaxDuration {
		r = fmt.Sprintf("at least %v", lo)
	}
	if zero != "" {
		return fmt.Sprintf("must be \"0s\" (%s) or %s", zero, r)
	}
	return "must be " + r
}

// prefixes reads an array of client addresses and networks (see
// parsePrefix), each reported at its own key, name[i]. The result is nil
// when the array is empty. Like integer, it reports false only for a
// present but unusable value.
func (t *table) prefixes(name string, dst *[]netip.Prefix) bool {
	var ss []string
	if !t.strs(name, &ss) {
		return !t.written(name)
	}
	key := t.keyOf(name)
	var out []netip.Prefix
	seen := map[netip.Prefix]int{}
	ok := true
	for i, s := range ss {
		p, err := parsePrefix(s)
		if err != nil {
			t.c.add(indexKey(key, i), "%v", err)
			ok = false
			continue
		}
		if j, dup := seen[p]; dup {
			t.c.add(indexKey(key, i), "%q is %s again: already %s (line %d)", s, p, indexKey(key, j), t.c.pos.line(indexKey(key, j)))
			ok = false
			continue
		}
		seen[p] = i
		out = append(out, p)
	}
	if !ok {
		return false
	}
	*dst = out
	return true
}

// parsePrefix reads a client address or network: CIDR notation
// ("10.0.0.0/8", "2001:db8::/32") with no host bits set, or a bare address
// ("192.0.2.7", a /32; "2001:db8::7", a /128). IPv4-mapped IPv6 comes back
// as IPv4 ("::ffff:10.0.0.0/104" is 10.0.0.0/8), as client addresses are
// matched. Zones are refused: they name a link, not a client.
func parsePrefix(s string) (netip.Prefix, error) {
	const examples = `e.g. "192.0.2.7", "10.0.0.0/8" or "2001:db8::/32"`
	if s == "" {
		return netip.Prefix{}, fmt.Errorf("must not be empty: write an address or a CIDR network, %s", examples)
	}
	addrText, bitsText, hasBits := strings.Cut(s, "/")
	if i := strings.IndexByte(addrText, '%'); i >= 0 {
		return netip.Prefix{}, fmt.Errorf("%q has a zone (%s): a client address has none; write it without, e.g. %q", s, addrText[i:], addrText[:i]+strings.TrimPrefix(s, addrText))
	}
	if !hasBits {
		a, err := netip.ParseAddr(s)
		if err != nil {
			if looksLikeHostName(s) {
				return netip.Prefix{}, fmt.Errorf("%q is a name: write an IP address or a CIDR network, %s; l4lb does not resolve DNS", s, examples)
			}
			return netip.Prefix{}, fmt.Errorf("%q is not an IP address or a CIDR network (%s): %s", s, parseAddrReason(s, err), examples)
		}
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	a, err := netip.ParseAddr(addrText)
	if err != nil {
		if looksLikeHostName(addrText) {
			return netip.Prefix{}, fmt.Errorf("%q: %q is a name: write an IP address or a CIDR network, %s; l4lb does not resolve DNS", s, addrText, examples)
		}
		return netip.Prefix{}, fmt.Errorf("%q is not a CIDR network (address %q: %s): %s", s, addrText, parseAddrReason(addrText, err), examples)
	}
	bits, err := strconv.Atoi(bitsText)
	switch {
	case bitsText == "":
		return netip.Prefix{}, fmt.Errorf("%q has no prefix length after the slash: %s, or the bare address for one", s, examples)
	case err != nil || bitsText[0] < '0' || bitsText[0] > '9' || len(bitsText) > 1 && bitsText[0] == '0':
		return netip.Prefix{}, fmt.Errorf("%q: prefix length %q is not a number of bits (0..%d, no leading zeros)", s, bitsText, a.BitLen())
	case bits > a.BitLen():
		family := "IPv6"
		if a.Is4() {
			family = "IPv4"
		}
		return netip.Prefix{}, fmt.Errorf("%q: prefix length %d is out of range: an %s network has 0..%d bits", s, bits, family, a.BitLen())
	}
	p, err := netip.ParsePrefix(s)
	if err != nil { // not expected after the checks above
		return netip.Prefix{}, fmt.Errorf("%q is not a CIDR network (%s): %s", s, strings.TrimPrefix(err.Error(), "netip.ParsePrefix("+strconv.Quote(s)+"): "), examples)
	}
	if m := p.Masked(); m != p {
		return netip.Prefix{}, fmt.Errorf("%q has host bits set: write %q for the network, or %q for the one address", s, unmapPrefix(m).String(), p.Addr().Unmap().String())
	}
	return unmapPrefix(p), nil
}

// unmapPrefix turns an IPv4-mapped IPv6 prefix (::ffff:a.b.c.d/96+n) into
// the IPv4 one (a.b.c.d/n); other prefixes come back as they are.
func unmapPrefix(p netip.Prefix) netip.Prefix {
	if p.Addr().Is4In6() && p.Bits() >= 96 {
		return netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
	}
	return p
}

// checkStateFileName reports a [global] state_file that cannot name a
// file whatever the host.
func checkStateFileName(c *collector, key, path string) {
	if path == "" {
		return
	}
	switch base := filepath.Base(path); {
	case strings.ContainsRune(path, 0):
		c.add(key, "%q holds a NUL byte, which no file name can", path)
	case strings.HasSuffix(path, "/") || base == "." || base == "..":
		c.add(key, "%q names a directory: name the file to keep runtime changes in, e.g. \"/var/lib/l4lb/state.json\"", path)
	}
}

// checkStateFile reports a [global] state_file run could not keep runtime
// changes in, without creating or changing anything (check must leave the
// host as it found it): its directory must exist and be writable (the file
// is replaced through a new file beside it), and an existing file must be
// a regular file that opens for reading and writing. A missing file is
// fine: the first change creates it.
func checkStateFile(c *collector, g Global) {
	if g.StateFile == "" {
		return
	}
	const key = "global.state_file"
	st, err := os.Stat(g.StateFile)
	switch {
	case err == nil && st.IsDir():
		c.add(key, "%q is a directory: name the file to keep runtime changes in", g.StateFile)
		return
	case err == nil && !st.Mode().IsRegular():
		c.add(key, "%q is not a regular file (%v)", g.StateFile, st.Mode().Type())
		return
	case err == nil:
		f, err := os.OpenFile(g.StateFile, os.O_RDWR, 0)
		if err != nil {
			c.add(key, "cannot read and write the state file: %v", err)
			return
		}
		f.Close()
	case !errors.Is(err, fs.ErrNotExist):
		c.add(key, "cannot use the state file: %v", err)
		return
	}
	dir := filepath.Dir(g.StateFile)
	if err := unix.Access(dir, unix.W_OK|unix.X_OK); err != nil {
		c.add(key, "cannot keep runtime changes in %q: directory %s: %v", g.StateFile, dir, err)
	}
}
