package discovery

import (
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/miekg/dns"

	"github.com/l4lb/l4lb/internal/testnet"
)

// dnsServer is an in-process DNS server on 127.0.0.1, UDP and TCP on one
// port, answering from records the test sets: NXDOMAIN for a name it has
// no record of, NOERROR with no answer (NODATA) for a name it knows with
// other types, an SOA in the authority section of both (the SOA among the
// records, or one of TTL 5).
type dnsServer struct {
	addr string

	mu       sync.Mutex
	records  []dns.RR
	mode     serverMode
	truncate bool            // UDP answers carry only the TC bit
	failing  map[string]bool // names answered SERVFAIL, lower case
	negTTL   uint32
	queries  map[string]int // by "udp A web.test.", "tcp SRV ..."
}

type serverMode int

const (
	answering  serverMode = iota
	silent                // reads queries, never answers: the client times out
	servfail              // answers SERVFAIL
	truncating            // UDP answers carry only the TC bit; TCP ones all
)

// startDNSServer starts a server with the records in zone-file syntax;
// it stops when the test ends.
func startDNSServer(t *testing.T, records ...string) *dnsServer {
	t.Helper()
	s := &dnsServer{queries: map[string]int{}, failing: map[string]bool{}}
	s.set(t, records...)
	pc, ln := listenUDPAndTCP(t)
	s.addr = pc.LocalAddr().String()
	for _, srv := range []*dns.Server{{PacketConn: pc, Handler: s}, {Listener: ln, Handler: s}} {
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		served := make(chan error, 1)
		go func() { served <- srv.ActivateAndServe() }()
		select {
		case <-started:
		case err := <-served:
			t.Fatalf("dns server: %v", err)
		}
		t.Cleanup(func() {
			srv.Shutdown()
			<-served
		})
	}
	return s
}

// listenUDPAndTCP binds UDP and TCP on one port of 127.0.0.1 that the
// kernel chose for the UDP socket.
func listenUDPAndTCP(t *testing.T) (net.PacketConn, net.Listener) {
	t.Helper()
	for range 20 {
		pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp4", pc.LocalAddr().String())
		if err == nil {
			return pc, ln
		}
		pc.Close()
	}
	t.Fatal("no port free for both UDP and TCP on 127.0.0.1")
	return nil, nil
}

// set replaces the records.
func (s *dnsServer) set(t *testing.T, records ...string) {
	t.Helper()
	rrs := make([]dns.RR, len(records))
	for i, r := range records {
		rr, err := dns.NewRR(r)
		if err != nil {
			t.Fatalf("record %q: %v", r, err)
		}
		rrs[i] = rr
	}
	s.mu.Lock()
	s.records = rrs
	s.mu.Unlock()
}

func (s *dnsServer) setMode(m serverMode) {
	s.mu.Lock()
	s.mode = m
	s.mu.Unlock()
}

// failName makes the server answer SERVFAIL for name.
func (s *dnsServer) failName(name string) {
	s.mu.Lock()
	s.failing[strings.ToLower(dns.Fqdn(name))] = true
	s.mu.Unlock()
}

// count is how many queries came in over network ("udp", "tcp") for
// qtype ("A", "SRV", ...) of name, or of any type with qtype "".
func (s *dnsServer) count(network, qtype, name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for k, v := range s.queries {
		f := strings.Fields(k)
		if f[0] == network && (qtype == "" || f[1] == qtype) && f[2] == dns.Fqdn(name) {
			n += v
		}
	}
	return n
}

func (s *dnsServer) ServeDNS(rw dns.ResponseWriter, req *dns.Msg) {
	q := req.Question[0]
	network := rw.LocalAddr().Network()
	s.mu.Lock()
	s.queries[network+" "+dns.TypeToString[q.Qtype]+" "+strings.ToLower(q.Name)]++
	mode := s.mode
	if s.failing[strings.ToLower(q.Name)] {
		mode = servfail
	}
	answer, known := s.answerLocked(q)
	soa := s.soaLocked()
	s.mu.Unlock()
	m := new(dns.Msg)
	m.SetReply(req)
	m.Authoritative, m.RecursionAvailable = true, true
	switch {
	case mode == silent:
		return
	case mode == servfail:
		m.Rcode = dns.RcodeServerFailure
	case mode == truncating && network == "udp":
		m.Truncated = true
	case len(answer) > 0:
		m.Answer = answer
	default:
		if !known {
			m.Rcode = dns.RcodeNameError
		}
		m.Ns = []dns.RR{soa}
	}
	rw.WriteMsg(m)
}

// soaLocked is the SOA among the records, or one whose TTL and minimum
// are 5.
func (s *dnsServer) soaLocked() dns.RR {
	for _, rr := range s.records {
		if rr.Header().Rrtype == dns.TypeSOA {
			return dns.Copy(rr)
		}
	}
	return &dns.SOA{
		Hdr: dns.RR_Header{Name: "test.", Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: 5},
		Ns:  "ns.test.", Mbox: "hostmaster.test.", Serial: 1, Refresh: 60, Retry: 60, Expire: 600, Minttl: 5,
	}
}

// answerLocked is the records answering q, CNAMEs on the way first, as
// a recursive resolver gives them; known: the name has records of some
// type.
func (s *dnsServer) answerLocked(q dns.Question) (answer []dns.RR, known bool) {
	name := q.Name
	for range 8 {
		var cname *dns.CNAME
		found := false
		for _, rr := range s.records {
			h := rr.Header()
			if !strings.EqualFold(h.Name, name) {
				continue
			}
			known = true
			switch {
			case h.Rrtype == q.Qtype:
				answer = append(answer, dns.Copy(rr))
				found = true
			case h.Rrtype == dns.TypeCNAME:
				cname = rr.(*dns.CNAME)
			}
		}
		if found || cname == nil {
			return answer, known
		}
		answer = append(answer, dns.Copy(cname))
		name = cname.Target
	}
	return answer, known
}

// closedPort is an address on 127.0.0.1 nothing listens on (UDP): a
// query there is refused at once (ICMP port unreachable).
func closedPort(t *testing.T) string { return testnet.FreeAddr(t) }

// rr is a record in zone-file syntax: "name ttl IN type data".
func rr(name string, ttl int, typ, data string) string {
	return name + " " + strconv.Itoa(ttl) + " IN " + typ + " " + data
}
