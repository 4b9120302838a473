package e2e

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/proxyproto"
)

// Helpers of TestProxyProtocolToRealBackends: finding nginx (with its
// stream module) and HAProxy, running them as children of the test, and a
// Go backend that reads a PROXY header with pkg/proxyproto.

// nginxStreamModulePath is where Debian's libnginx-mod-stream puts the
// stream module (as bench/nginx.go).
const nginxStreamModulePath = "/usr/lib/nginx/modules/ngx_stream_module.so"

// proxyTools are the programs the test drives.
type proxyTools struct {
	nginx, haproxy string
	// streamModule is the load_module path; "" when nginx has stream
	// built in.
	streamModule string
}

// needProxyTools finds nginx with its stream module and haproxy. Without
// them the test skips, unless the environment variable CI is set: there it
// fails, since .ci/run installs them.
func needProxyTools(t *testing.T) proxyTools {
	t.Helper()
	var tools proxyTools
	var missing []string
	tools.nginx = testnet.ToolPath("nginx")
	switch {
	case tools.nginx == "":
		missing = append(missing, "nginx")
	default:
		out, err := exec.Command(tools.nginx, "-V").CombinedOutput()
		if err != nil {
			missing = append(missing, fmt.Sprintf("a working nginx (nginx -V: %v)", err))
			break
		}
		// Whole words: "--with-stream_ssl_module" is not the stream module.
		words := strings.Fields(string(out))
		switch {
		case ppHasWord(words, "--with-stream=dynamic"):
			if _, err := os.Stat(nginxStreamModulePath); err != nil {
				missing = append(missing, "nginx's stream module "+nginxStreamModulePath)
			}
			tools.streamModule = nginxStreamModulePath
		case ppHasWord(words, "--with-stream"):
			// Built in: no load_module.
		default:
			missing = append(missing, "an nginx built with the stream module")
		}
	}
	if tools.haproxy = testnet.ToolPath("haproxy"); tools.haproxy == "" {
		missing = append(missing, "haproxy")
	}
	if len(missing) > 0 {
		testnet.Missing(t, strings.Join(missing, ", ")+" not installed", "nginx", "libnginx-mod-stream", "haproxy")
	}
	return tools
}

func ppHasWord(words []string, w string) bool {
	for _, x := range words {
		if x == w {
			return true
		}
	}
	return false
}

// ppStartChild runs a program other than l4lb (nginx, haproxy) in the
// foreground, as one process, until the test ends (startProc).
func ppStartChild(t *testing.T, name, bin string, logs []string, args ...string) *proc {
	t.Helper()
	return startProc(t, name, exec.Command(bin, args...), logs)
}

// ppWaitLog waits until p's stderr holds s, failing the test if p exits
// first.
func ppWaitLog(t *testing.T, name string, p *proc, s string) {
	t.Helper()
	testnet.Eventually(t, fmt.Sprintf("%s to log %q", name, s), func() bool {
		if done, err := exited(p); done {
			t.Fatalf("%s exited early: %v\n%s", name, err, p.stderr.String())
		}
		return strings.Contains(p.stderr.String(), s)
	})
}

// proxyEcho is a backend that expects a PROXY header (v1 or v2, read with
// proxyproto.Parse) at the start of every connection and answers one line
// saying what it read, in the form of the test's nginx:
//
//	TAG vVERSION SRCADDR SRCPORT DSTADDR DSTPORT
//
// ("TAG vVERSION local" for a LOCAL header, "TAG error ..." for bytes that
// are no header, and the connection closed), then echoes everything after
// the header, bytes that came in the header's segment included.
type proxyEcho struct {
	tag, addr string
	ln        net.Listener
	wg        sync.WaitGroup
	mu        sync.Mutex
	conns     map[net.Conn]struct{}
	// refused counts connections whose first bytes were no PROXY header.
	refused atomic.Int64
}

// startProxyEcho listens on a free port of 127.0.0.1 until the test ends.
func startProxyEcho(t *testing.T, tag string) *proxyEcho {
	t.Helper()
	testnet.CheckLeaks(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &proxyEcho{tag: tag, addr: ln.Addr().String(), ln: ln, conns: map[net.Conn]struct{}{}}
	e.wg.Add(1)
	go e.serve()
	t.Cleanup(e.close)
	return e
}

func (e *proxyEcho) close() {
	e.ln.Close()
	e.mu.Lock()
	for c := range e.conns {
		c.Close()
	}
	e.mu.Unlock()
	e.wg.Wait()
}

func (e *proxyEcho) serve() {
	defer e.wg.Done()
	for {
		c, err := e.ln.Accept()
		if err != nil {
			return
		}
		e.mu.Lock()
		e.conns[c] = struct{}{}
		e.mu.Unlock()
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			defer func() {
				e.mu.Lock()
				delete(e.conns, c)
				e.mu.Unlock()
				c.Close()
			}()
			e.handle(c)
		}()
	}
}

func (e *proxyEcho) handle(c net.Conn) {
	c.SetDeadline(time.Now().Add(30 * time.Second))
	buf := make([]byte, proxyproto.MaxLength)
	n := 0
	for {
		m, err := c.Read(buf[n:])
		n += m
		h, hl, perr := proxyproto.Parse(buf[:n])
		if errors.Is(perr, proxyproto.ErrNeedMore) {
			if err != nil {
				return // a health check's connect, or a client gone
			}
			continue
		}
		if perr != nil {
			e.refused.Add(1)
			fmt.Fprintf(c, "%s error %v\n", e.tag, perr)
			return
		}
		if h.Local {
			fmt.Fprintf(c, "%s v%d local\n", e.tag, h.Version)
		} else {
			fmt.Fprintf(c, "%s v%d %s\n", e.tag, h.Version, ppAddrWords(h.Src, h.Dst))
		}
		if hl < n {
			if _, err := c.Write(buf[hl:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
		break
	}
	r := bufio.NewReader(c)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			if _, werr := c.Write(line); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// ppAddrWords is "SRCADDR SRCPORT DSTADDR DSTPORT", addresses as nginx's
// $proxy_protocol_addr shows them (no brackets, IPv4 unmapped).
func ppAddrWords(src, dst netip.AddrPort) string {
	return fmt.Sprintf("%s %d %s %d", src.Addr().Unmap(), src.Port(), dst.Addr().Unmap(), dst.Port())
}

// ppAddrPort is a net.Addr of a TCP socket as a netip.AddrPort.
func ppAddrPort(t *testing.T, a net.Addr) netip.AddrPort {
	t.Helper()
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		t.Fatalf("%v is not a TCP address", a)
	}
	return ta.AddrPort()
}
