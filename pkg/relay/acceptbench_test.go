package relay

import (
	"bufio"
	"fmt"
	"io"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/listener"
	"github.com/l4lb/l4lb/pkg/reactor"
)

// What a connection costs a loop when clients come one at a time (the
// sni bench's pattern, without TLS): each connects, exchanges 64 bytes
// with an echo backend through the loop and closes before the next one
// comes. Reported: the loop's busy time per connection (reactor Stats:
// its CPU, waits excluded) and its accept calls per connection. Bound it
// in connections (-benchtime=2000x): each leaves a port in TIME_WAIT.
func BenchmarkOneClientAtATime(b *testing.B) {
	echo := testnet.StartBackend(b, "b", "")
	pools := buildPools(b, []frontSpec{{name: "p", backends: []string{echo.Addr}}})
	sh := NewShared(1000, nil, nil)
	rl, err := reactor.New(reactor.Config{WakeCoalesce: config.DefaultWakeCoalesce})
	if err != nil {
		b.Fatal(err)
	}
	l := New(rl, sh)
	socks, err := listener.Bind("p", "127.0.0.1:0", 0, 1)
	if err != nil {
		b.Fatal(err)
	}
	if err := l.AddListener(socks.FDs[0], NewFront("p", pools["p"])); err != nil {
		b.Fatal(err)
	}
	var accepts atomic.Int64
	s := l.lsocks[0]
	inner := s.accept
	s.accept = func(fd int) (int, netip.AddrPort, error) { accepts.Add(1); return inner(fd) }
	l.r.Start()
	defer func() { l.r.Stop(); l.r.Wait() }()

	msg := fmt.Sprintf("%063d\n", 0) // 64 bytes
	var busy time.Duration
	l.r.Do(func() { busy = l.r.Stats().Busy })
	b.ResetTimer()
	for b.Loop() {
		c, err := dialTCP(socks.Addr.String())
		if err != nil {
			b.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(20 * time.Second))
		r := bufio.NewReader(c)
		if _, err := r.ReadString('\n'); err != nil {
			b.Fatal(err)
		}
		if _, err := io.WriteString(c, msg); err != nil {
			b.Fatal(err)
		}
		if line, err := r.ReadString('\n'); err != nil || line != msg {
			b.Fatalf("%q, %v", line, err)
		}
		c.Close()
	}
	b.StopTimer()
	testnet.WaitUntil(20*time.Second, func() bool { return sh.Active.Load() == 0 })
	l.r.Do(func() { busy = l.r.Stats().Busy - busy })
	b.ReportMetric(float64(busy.Nanoseconds())/float64(b.N), "loop-ns/conn")
	b.ReportMetric(float64(accepts.Load())/float64(b.N), "accepts/conn")
}
