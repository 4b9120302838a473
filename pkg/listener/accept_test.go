package listener_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/pool"
	"github.com/l4lb/l4lb/pkg/server"
)

// The sockets of Bind as the event loops serve them: accepting is the
// loop's (pkg/relay), and so is backing off when it fails. This test was
// the goroutine accept loop's; it runs on server.Server now.

// An accept error such as running out of file descriptors does not stop
// the listener: the loop backs off (5 ms doubling to 1 s) and accepts the
// queued connections once fds are back.
func TestAcceptBacksOffOnEMFILEAndRecovers(t *testing.T) {
	testnet.CheckLeaks(t)
	be := testnet.StartBackend(t, "b", "")
	text := fmt.Sprintf("[[listener]]\nname = \"l\"\nbind = %q\npool = \"p\"\n[pool.p]\n[pool.p.health]\nenabled = false\n[[pool.p.backend]]\naddr = %q\n",
		testnet.FreeAddr(t), be.Addr)
	cfg, err := config.Parse("t.toml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	p, err := pool.New(cfg.Pools["p"], pool.Deps{Store: breaker.NewMemoryStore(nil)})
	if err != nil {
		t.Fatal(err)
	}
	s, err := server.New(server.Config{
		Frontends:      []server.Frontend{{Name: "l", Bind: cfg.Listeners[0].Bind, Pool: p}},
		Loops:          1,
		MaxConnections: 100,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})
	addr, _ := s.Addr("l")
	// Queue connections before the fd limit is lowered: bound, not yet
	// accepting.
	var clients []net.Conn
	for i := 0; i < 3; i++ {
		c, err := net.DialTimeout("tcp", addr.String(), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients = append(clients, c)
	}
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	// The limit bounds fd numbers: set it to the lowest free one, found by
	// opening a probe fd, and every new fd fails with EMFILE.
	probe, err := syscall.Dup(0)
	if err != nil {
		t.Fatal(err)
	}
	syscall.Close(probe)
	low := old
	low.Cur = uint64(probe)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	restored := false
	restore := func() {
		if !restored {
			syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old)
			restored = true
		}
	}
	defer restore()

	s.Serve()
	stats := func() server.ListenerStats { return s.Stats()[0] }
	// Two failures: the first, then the retry after the back-off. How the
	// back-off grows, and that it does not spin, is counted in loop turns
	// by pkg/relay's TestAcceptBacksOffDoublingOnResourceErrors.
	testnet.Eventually(t, "accept to fail, back off and fail again", func() bool { return stats().AcceptErrors >= 2 })
	st := stats()
	restore()
	if n := st.OK + st.Failed + st.Rejected; n != 0 || s.Active() != 0 {
		t.Fatalf("accepted while out of fds: %+v", st)
	}
	for i, c := range clients {
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		if tag, err := bufio.NewReader(c).ReadString('\n'); err != nil || tag != "b\n" {
			t.Fatalf("queued client %d after fds are back: %q, %v; want it accepted and served", i, tag, err)
		}
	}
	if st := stats(); st.OK != int64(len(clients)) {
		t.Fatalf("listener counters %+v, want the %d queued clients served", st, len(clients))
	}
}
