package relay

import (
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/pkg/clienthello"
	"github.com/l4lb/l4lb/pkg/pool"
	"github.com/l4lb/l4lb/pkg/rawsys"
)

// Routing by TLS server name (SNI) without terminating TLS: a client of a
// listener with routes is inspected before any dial. The loop peeks at
// what the client sent (MSG_PEEK: nothing is taken off the socket, so the
// backend later reads the ClientHello from the client's socket as if no
// one had looked) until pkg/clienthello has a verdict, then picks the
// route's pool, and the pick, the dial and the breaker's generation
// capture happen as for any client. Inspection is a phase of the
// connection on its loop: no goroutine, no copy kept, one timer.

// Routing is a TCP listener's routes: how a ClientHello picks a pool, and
// what happens to a client whose first bytes are none.
type Routing struct {
	// Match returns the route for a ClientHello's server name and offered
	// protocols; ok false: no route matches, the listener's pool serves.
	Match  func(serverName string, alpn []string) (route int, ok bool)
	Routes []*Route
	// Timeout is inspect_timeout: the whole ClientHello must arrive
	// within it. A client that sent nothing by then is a server-first
	// protocol's (SMTP's greeting comes from the server) and goes to the
	// listener's pool.
	Timeout time.Duration
	// Reset: a client whose first bytes are not a ClientHello (not TLS,
	// malformed, closed within it) is reset (on_unrecognized = "reset")
	// rather than sent to the listener's pool; ResetTooLarge the same for
	// a ClientHello past clienthello.MaxBytes (on_too_large). A client
	// still sending its ClientHello at the timeout goes to the listener's
	// pool either way.
	Reset, ResetTooLarge bool
	// Results counts inspections by how they ended (InspectResults).
	Results [numInspectResults]atomic.Int64
}

// Route is one route: its name in metrics, its pool, and the clients it
// took.
type Route struct {
	Name    string
	Pool    *pool.Pool
	Clients atomic.Int64
}

// inspectResult is how an inspection ended.
type inspectResult uint8

const (
	inspectRouted      inspectResult = iota // a ClientHello a route matched
	inspectUnmatched                        // a ClientHello no route matched (or without SNI): the listener's pool
	inspectNotTLS                           // the first bytes are not a TLS handshake
	inspectMalformed                        // TLS, but no valid ClientHello
	inspectTooLarge                         // a ClientHello past clienthello.MaxBytes
	inspectIncomplete                       // part of a ClientHello, then the timeout or the client's FIN
	inspectServerFirst                      // nothing at all within inspect_timeout
	numInspectResults
)

// InspectResults names every way an inspection ends, for the metric's
// label.
var InspectResults = [numInspectResults]string{"routed", "unmatched", "not_tls", "malformed", "too_large", "incomplete", "server_first"}

// CarryCounts starts r's counters where prev's are (a reload replaced a
// listener's routes): the results, and each route's clients by name, so
// no counter of the metrics goes back. Either may be nil.
func (r *Routing) CarryCounts(prev *Routing) {
	if r == nil || prev == nil {
		return
	}
	for i := range r.Results {
		r.Results[i].Store(prev.Results[i].Load())
	}
	// By name: routes that share one are counted together (RouteClients),
	// so the first of the name carries the sum on.
	was := prev.RouteClients()
	seen := map[string]bool{}
	for _, route := range r.Routes {
		if !seen[route.Name] {
			seen[route.Name] = true
			route.Clients.Store(was[route.Name])
		}
	}
}

// RouteClients sums the clients each route took by the route's name
// (l4lb_route_connections_total: routes that share a name are one).
func (r *Routing) RouteClients() map[string]int64 {
	out := make(map[string]int64, len(r.Routes))
	for _, route := range r.Routes {
		out[route.Name] += route.Clients.Load()
	}
	return out
}

// SetRouting makes r the listener's routes for clients accepted from now;
// nil: none (no inspection).
func (f *Front) SetRouting(r *Routing) { f.routing.Store(r) }

// Routing is the listener's routes now; nil: none.
func (f *Front) Routing() *Routing { return f.routing.Load() }

// routed is what inspection learnt of a client (only routed listeners'
// connections have one).
type routed struct {
	rt         *Routing
	route      *Route // nil: the listener's pool
	serverName string
}

// startInspect begins the inspection of an admitted client.
func (c *conn) startInspect(rt *Routing) {
	c.phase = phaseInspect
	c.sni = c.l.routes.get()
	c.sni.rt = rt
	c.l.r.Arm(&c.timer, c.l.r.Clock()+int64(rt.Timeout))
	if c.cl.readable {
		c.inspect(rt) // it came with the PROXY header's segment
	}
	// Otherwise the ClientHello's readiness brings the first look: epoll
	// reports bytes already queued when the socket was registered, so a
	// look now would mostly cost a recvfrom that finds nothing.
}

// inspect peeks at what the client has sent and acts on the verdict.
func (c *conn) inspect(rt *Routing) {
	buf := c.l.peekBuffer()
	n, ok := c.peekFirst(buf, "its ClientHello", CloseClientLeft)
	if !ok {
		return
	}
	v, h := c.l.hellos.Inspect(buf[:n])
	switch v {
	case clienthello.NeedMore:
		if c.cl.peerDone {
			c.unrecognized(rt, inspectIncomplete)
			return
		}
		c.cl.readable = false // edge-triggered: the next segment says when
	case clienthello.Complete:
		c.routeHello(rt, h)
	case clienthello.TooLarge:
		if rt.ResetTooLarge {
			c.resetUnrecognized(rt, inspectTooLarge)
			return
		}
		c.inspected(rt, inspectTooLarge)
	case clienthello.NotTLS:
		c.unrecognized(rt, inspectNotTLS)
	default:
		c.unrecognized(rt, inspectMalformed)
	}
}

// routeHello dials the pool of the route the ClientHello matches, or the
// listener's.
func (c *conn) routeHello(rt *Routing, h clienthello.Hello) {
	c.sni.serverName = h.ServerName
	res := inspectUnmatched
	if i, ok := rt.Match(h.ServerName, h.ALPN); ok && h.ServerName != "" {
		r := rt.Routes[i]
		c.sni.route, c.pool = r, r.Pool
		r.Clients.Add(1)
		res = inspectRouted
	}
	c.inspected(rt, res)
}

// unrecognized sends a client whose first bytes are no ClientHello to the
// listener's pool, or resets it (on_unrecognized).
func (c *conn) unrecognized(rt *Routing, res inspectResult) {
	if rt.Reset {
		c.resetUnrecognized(rt, res)
		return
	}
	c.inspected(rt, res)
}

func (c *conn) resetUnrecognized(rt *Routing, res inspectResult) {
	rt.Results[res].Add(1)
	c.l.r.Disarm(&c.timer)
	c.refuseBy(CloseUnrecognized, true)
}

// inspectTimedOut ends an inspection at inspect_timeout with the
// listener's pool: a client that sent nothing speaks a server-first
// protocol (SMTP's greeting comes from the server); one that sent part of
// a ClientHello is too slow to route, and is counted apart.
func (c *conn) inspectTimedOut(rt *Routing) {
	var b [1]byte
	if n, _ := rawsys.Recv(c.cl.fd, b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT); n <= 0 {
		c.inspected(rt, inspectServerFirst)
		return
	}
	c.inspected(rt, inspectIncomplete)
}

// inspected ends the inspection and dials.
func (c *conn) inspected(rt *Routing, res inspectResult) {
	rt.Results[res].Add(1)
	c.l.r.Disarm(&c.timer)
	c.phase = phaseDialing
	c.startDial()
}

// peekBuffer is the loop's scratch for ClientHellos: one past
// clienthello.MaxBytes, so a larger one is seen as such. The loop's
// hello reader comes with it.
func (l *Loop) peekBuffer() []byte {
	if l.peek == nil {
		l.peek = make([]byte, clienthello.MaxBytes+1)
		l.hellos = clienthello.NewReader()
	}
	return l.peek
}
