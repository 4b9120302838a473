package discovery

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// The query path, after Go's resolver (net/dnsclient_unix.go) and glibc:
// UDP first with an EDNS0 buffer of 1232 bytes (DNS flag day 2020); a
// truncated UDP answer is asked again over TCP, and a truncated TCP answer
// is taken as it is. A resolver that times out, cannot be reached, answers
// SERVFAIL, REFUSED or any code but NOERROR and NXDOMAIN, sends a lame
// referral or answers another question is skipped for the next one;
// NXDOMAIN is final (the name does not exist, another resolver will not
// say otherwise).

// udpSize is the EDNS0 buffer the queries advertise.
const udpSize = 1232

// errTimeout marks a query every resolver left unanswered within the
// timeout: the "timeout" result rather than "error".
var errTimeout = errors.New("no resolver answered in time")

// resolvers asks a list of resolvers, beginning with the one that
// answered last, so a dead first resolver costs one timeout, not one per
// query. Only the watcher's goroutine uses it.
type resolvers struct {
	plan      *plan
	preferred string // the resolver that answered last
}

// servers is the resolvers to ask now: the Spec's, or those of
// resolv.conf, read again each time (as Go's resolver does, so an edited
// file is followed); a file that cannot be read or names none gives the
// local resolver, as glibc and Go do.
func (r *resolvers) servers() []string {
	if r.plan.resolvers != nil {
		return r.plan.resolvers
	}
	cc, err := dns.ClientConfigFromFile(r.plan.spec.ResolvConf)
	if err != nil || len(cc.Servers) == 0 {
		return []string{"127.0.0.1:53", "[::1]:53"}
	}
	out := make([]string, len(cc.Servers))
	for i, s := range cc.Servers {
		out[i] = net.JoinHostPort(s, cc.Port)
	}
	return out
}

// query asks for name's records of type qtype. It returns an answer
// whose Rcode is NOERROR or NXDOMAIN, or an error (errTimeout when every
// resolver timed out).
func (r *resolvers) query(ctx context.Context, name string, qtype uint16) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.SetEdns0(udpSize, false)
	servers := r.servers()
	start := 0
	for i, s := range servers {
		if s == r.preferred {
			start = i
		}
	}
	var errs []error
	timeouts := 0
	for i := range servers {
		server := servers[(start+i)%len(servers)]
		in, err := r.exchange(ctx, server, m)
		if err == nil {
			err = checkAnswer(m, in)
		}
		if err == nil {
			r.preferred = server
			return in, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			timeouts++
		}
		errs = append(errs, fmt.Errorf("%s: %w", server, err))
	}
	err := errors.Join(errs...)
	if timeouts == len(servers) {
		err = fmt.Errorf("%w: %v", errTimeout, err)
	}
	return nil, fmt.Errorf("%s %s: %w", dns.TypeToString[qtype], name, err)
}

// checkAnswer is what makes in an answer to m, or the reason to ask the
// next resolver.
func checkAnswer(m, in *dns.Msg) error {
	if len(in.Question) != 1 || !strings.EqualFold(in.Question[0].Name, m.Question[0].Name) ||
		in.Question[0].Qtype != m.Question[0].Qtype {
		return errors.New("answer to another question")
	}
	switch in.Rcode {
	case dns.RcodeSuccess:
		if !in.Authoritative && !in.RecursionAvailable && len(in.Answer) == 0 && len(in.Extra) == 0 {
			return errors.New("lame referral")
		}
		return nil
	case dns.RcodeNameError:
		return nil
	default:
		return fmt.Errorf("answered %s", dns.RcodeToString[in.Rcode])
	}
}

// exchange sends m to server over UDP, and over TCP when the UDP answer
// was truncated.
func (r *resolvers) exchange(ctx context.Context, server string, m *dns.Msg) (*dns.Msg, error) {
	in, err := r.exchangeOn(ctx, "udp", server, m)
	if err == nil && in.Truncated {
		in, err = r.exchangeOn(ctx, "tcp", server, m)
	}
	return in, err
}

// longAgo is a deadline in the past: it wakes a blocked read at once.
var longAgo = time.Unix(1, 0)

func (r *resolvers) exchangeOn(ctx context.Context, network, server string, m *dns.Msg) (*dns.Msg, error) {
	ctx, cancel := context.WithTimeout(ctx, r.plan.spec.Timeout)
	defer cancel()
	c := dns.Client{Net: network, Timeout: r.plan.spec.Timeout, UDPSize: udpSize}
	conn, err := c.DialContext(ctx, server)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	// The library heeds only ctx's deadline: a watcher stopped in the
	// middle of a query would wait the timeout out. Waking the read ends
	// it now; the callback is waited for, so no goroutine outlives Run.
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(fired)
		conn.SetDeadline(longAgo)
	})
	defer func() {
		if !stop() {
			<-fired
		}
	}()
	in, _, err := c.ExchangeWithConnContext(ctx, m, conn)
	return in, err
}
