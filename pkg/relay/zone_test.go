package relay

import (
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
)

const zoneChildEnv = "L4LB_TEST_ZONE_CHILD"

// A backend at a link-local IPv6 address names its interface in its zone
// ("[fe80::77%zl0]:port"): the loop's raw connect must carry it as the
// scope id, or connect(2) refuses the address (EINVAL) and every client
// dial fails while Go-dialed health checks pass. Runs in a namespace of
// its own, on a veth made there.
func TestLinkLocalBackendByZone(t *testing.T) {
	testnet.RunInNetns(t, zoneChildEnv, "TestLinkLocalBackendInNamespace", 2*time.Minute)
}

func TestLinkLocalBackendInNamespace(t *testing.T) {
	if os.Getenv(zoneChildEnv) == "" {
		t.Skip("runs inside TestLinkLocalBackendByZone's network namespace")
	}
	for _, args := range [][]string{
		{"link", "add", "zl0", "type", "veth", "peer", "name", "zl1"},
		{"link", "set", "zl0", "up"},
		{"link", "set", "zl1", "up"},
		{"-6", "addr", "add", "fe80::77/64", "dev", "zl0", "nodad"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Skipf("ip %v: %v\n%s (no veth here)", args, err, out)
		}
	}
	zl0, err := net.InterfaceByName("zl0")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "[fe80::77%zl0]:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				// Plain reads and writes: io.Copy between two TCPConns
				// splices through the runtime's own pipes, which stay
				// pooled and read as leaked fds.
				defer c.Close()
				buf := make([]byte, 512)
				for {
					n, err := c.Read(buf)
					if n > 0 {
						c.Write(buf[:n])
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	// A veth's carrier comes up a while after "link set up" (the kernel's
	// link watch runs deferred, later on a busy machine), and until it
	// does a connect to the address waits out its SYN's retries: the
	// relay's first dial would fail at its connect_timeout. Wait until a
	// connect of the test's own gets through.
	direct := net.JoinHostPort("fe80::77%zl0", strconv.Itoa(port))
	testnet.Eventually(t, "the link-local address to take connections", func() bool {
		c, err := net.DialTimeout("tcp", direct, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})

	// By name, and by index (the net package's other spelling).
	for _, addr := range []string{
		net.JoinHostPort("fe80::77%zl0", strconv.Itoa(port)),
		net.JoinHostPort("fe80::77%"+strconv.Itoa(zl0.Index), strconv.Itoa(port)),
	} {
		t.Run(addr, func(t *testing.T) {
			h := newHarness(t, harnessOpts{fronts: []frontSpec{{name: "p", backends: []string{addr}}}})
			c := h.dial("p")
			defer c.Close()
			c.SetDeadline(time.Now().Add(20 * time.Second))
			if _, err := c.Write([]byte("ping")); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 4)
			if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
				t.Fatalf("echo through %s: %q, %v", addr, buf, err)
			}
			if ok, failed := h.front("p").OK.Load(), h.front("p").Failed.Load(); ok != 1 || failed != 0 {
				t.Fatalf("clients ok %d, failed %d; want 1 and 0", ok, failed)
			}
		})
	}
}
