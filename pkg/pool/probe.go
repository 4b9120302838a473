package pool

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"

	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/dialer"
	"github.com/l4lb/l4lb/pkg/health"
	"github.com/l4lb/l4lb/pkg/proxyproto"
)

// The pool's own dials, made on goroutines of the breaker and the health
// prober rather than on the event loops: the breaker's recovery probe and
// the active health checks.
//
// Which check, by the pool's protocol and [health] type:
//
//	protocol  type         health check                        breaker probe
//	tcp       connect      TCP connect to addr (or host:port)  TCP connect to addr
//	tcp       send-expect  TCP send-expect to addr             TCP connect to addr
//	udp       connect      TCP connect to host:port (port 0:   UDP refusal probe to addr
//	                       the backend's own port)
//	udp       send-expect  UDP send-expect to addr             UDP send-expect to addr
//	udp       icmp         UDP refusal probe to addr           UDP refusal probe to addr
//	                       (the UDP default)
//	tcp       tls          TCP connect to addr (or host:port)  TCP connect to addr
//	                       and a TLS handshake

// checkKinds rejects a protocol or health type the pool cannot check; ""
// is the default (tcp, connect), for pools built without the parser.
func checkKinds(cfg *config.Pool) error {
	switch cfg.Protocol {
	case "", config.ProtocolTCP, config.ProtocolUDP:
	default:
		return fmt.Errorf("pool %s: unknown protocol %q", cfg.Name, cfg.Protocol)
	}
	switch cfg.Health.Type {
	case "", config.HealthConnect, config.HealthSendExpect, config.HealthICMP, config.HealthTLS:
	default:
		return fmt.Errorf("pool %s: unknown health check type %q", cfg.Name, cfg.Health.Type)
	}
	if cfg.Health.Type == config.HealthICMP && cfg.Protocol != config.ProtocolUDP {
		return fmt.Errorf("pool %s: icmp health checks are for UDP pools", cfg.Name)
	}
	if cfg.Health.Type == config.HealthTLS && cfg.Protocol == config.ProtocolUDP {
		return fmt.Errorf("pool %s: tls health checks are for TCP pools", cfg.Name)
	}
	if cfg.Health.Type == config.HealthTLS && cfg.Health.ServerName == "" {
		return fmt.Errorf("pool %s: a tls health check needs a server_name", cfg.Name)
	}
	if cfg.Health.Port < 0 || cfg.Health.Port > 65535 {
		return fmt.Errorf("pool %s: health port %d out of range", cfg.Name, cfg.Health.Port)
	}
	return nil
}

func (p *Pool) udp() bool        { return p.cfg.Protocol == config.ProtocolUDP }
func (p *Pool) sendExpect() bool { return p.cfg.Health.Type == config.HealthSendExpect }

// healthCheck is b's active check, before the pool's counting and
// readmission recording (newBackend wraps it).
func (p *Pool) healthCheck(b *Backend) health.Check {
	h := p.cfg.Health
	switch {
	case h.Type == config.HealthTLS:
		return health.TLSCheck(p.dialWithLocalHeader, p.connectAddr(b), health.TLSOptions{ServerName: h.ServerName, Roots: p.caFile}, dialer.IsLocal)
	case h.Type == config.HealthICMP:
		return health.UDPRefusalCheck(nil, b.Addr, dialer.IsLocal)
	case p.sendExpect() && p.udp():
		return health.UDPSendExpectCheck(nil, b.Addr, p.checkRequest(), h.Expect, dialer.IsLocal)
	case p.sendExpect():
		return health.TCPSendExpectCheck(p.dialer.DialContext, b.Addr, p.checkRequest(), h.Expect, dialer.IsLocal)
	default:
		return health.TCPCheck(p.dialWithLocalHeader, p.connectAddr(b), dialer.IsLocal)
	}
}

// dialWithLocalHeader is the pool's dial for connect and tls checks and
// probes: a backend that expects a PROXY header (proxy_protocol) is sent a
// LOCAL one ("the proxy itself, no client") before the connection closes
// or the ClientHello goes out, so it does not log every check as a broken
// header.
func (p *Pool) dialWithLocalHeader(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := p.dialer.DialContext(ctx, network, addr)
	if err != nil || p.ProxyProtocol() == 0 {
		return c, err
	}
	hdr := []byte("PROXY UNKNOWN\r\n")
	if p.ProxyProtocol() == 2 {
		hdr = proxyproto.AppendV2Local(nil)
	}
	if dl, ok := ctx.Deadline(); ok {
		c.SetWriteDeadline(dl)
	}
	c.Write(hdr) // best effort: the connect is what the check judges
	return c, nil
}

// checkRequest is what a send-expect check sends: the configured bytes,
// behind a PROXY header of the LOCAL kind when the pool's backends expect
// one (a backend that requires the header would drop a request without it;
// LOCAL says "the proxy itself, no client", as HAProxy's check-send-proxy).
func (p *Pool) checkRequest() []byte {
	send := p.cfg.Health.Send
	switch p.ProxyProtocol() {
	case 1:
		return append([]byte("PROXY UNKNOWN\r\n"), send...)
	case 2:
		return append(proxyproto.AppendV2Local(nil), send...)
	}
	return send
}

// caFileOf is the CA bundle of cfg's tls checks, one for all its
// backends; nil: no tls check, or one that verifies nothing. Its trouble
// at run time is logged once per change: while it lasts the checks are
// inconclusive and every backend keeps the health it had, which an
// operator must hear of without debug logging.
func caFileOf(cfg *config.Pool, log *slog.Logger) *health.CAFile {
	if cfg.Health.Type != config.HealthTLS || cfg.Health.CAFile == "" {
		return nil
	}
	return health.NewCAFile(cfg.Health.CAFile, func(err error) {
		if err != nil {
			log.Warn("tls health checks inconclusive: their ca_file cannot be used; every backend keeps its health until it can",
				"ca_file", cfg.Health.CAFile, "error", err)
			return
		}
		log.Info("tls health checks: their ca_file is usable again", "ca_file", cfg.Health.CAFile)
	})
}

// connectAddr is where b's connect or tls check goes: b's address, or its
// host at the health port when one is set (for UDP pools, the port of a
// TCP service beside the UDP one).
func (p *Pool) connectAddr(b *Backend) string {
	if p.cfg.Health.Port == 0 {
		return b.Addr
	}
	host, _, err := net.SplitHostPort(b.Addr)
	if err != nil { // not after netip.ParseAddrPort accepted it; keep the address
		return b.Addr
	}
	return net.JoinHostPort(host, strconv.Itoa(p.cfg.Health.Port))
}

// probeFunc is the breaker's own recovery dial for b: a TCP connect for a
// TCP pool. A UDP pool has no connect to make: it sends the health
// send-expect request when that is the check configured (within the health
// timeout), else one empty datagram that fails only when refused (within
// reply_timeout, the window in which the data path, too, takes an ICMP
// refusal of a session's first datagram as a failure). Silence passes the
// refusal probe: no evidence of refusal. Each probe is counted as kind
// probe, local trouble not at all.
func (p *Pool) probeFunc(b *Backend) func(ctx context.Context) breaker.Result {
	if p.udp() {
		check, bound := health.UDPRefusalCheck(nil, b.Addr, dialer.IsLocal), p.cfg.ReplyTimeout
		if p.sendExpect() {
			h := p.cfg.Health
			check, bound = health.UDPSendExpectCheck(nil, b.Addr, p.checkRequest(), h.Expect, dialer.IsLocal), h.Timeout
		}
		return func(ctx context.Context) breaker.Result {
			if bound > 0 { // else the breaker's probe deadline bounds it
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, bound)
				defer cancel()
			}
			o := outcome(check(ctx).Result)
			b.countDial(DialProbe, o)
			return breakerResult(o)
		}
	}
	return func(ctx context.Context) breaker.Result {
		c, err := p.dialWithLocalHeader(ctx, "tcp", b.Addr)
		o := dialer.Classify(err)
		b.countDial(DialProbe, o)
		if c != nil {
			c.Close()
		}
		return breakerResult(o)
	}
}

// outcome is a check's result as a dial's: pass is success, fail failure,
// inconclusive local trouble.
func outcome(r health.Result) dialer.Outcome {
	switch r {
	case health.Pass:
		return dialer.Success
	case health.Fail:
		return dialer.Failure
	default:
		return dialer.Local
	}
}
