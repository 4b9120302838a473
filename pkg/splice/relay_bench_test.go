package splice

import (
	"io"
	"net"
	"testing"
)

const benchChunk = 128 << 10

// benchProxy measures bulk transfer through one proxied TCP connection. The
// proxy between the two sockets is either the Relayer or a plain io.Copy
// per direction (what a naive Go proxy does). One op is one 128 KiB chunk.
func benchProxy(b *testing.B, relay func(client, backend *net.TCPConn)) {
	front, _ := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	back, _ := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	defer front.Close()
	defer back.Close()
	relayed := make(chan struct{})
	go func() {
		defer close(relayed)
		c, err := front.AcceptTCP()
		if err != nil {
			return
		}
		bc, err := net.DialTCP("tcp", nil, back.Addr().(*net.TCPAddr))
		if err != nil {
			c.Close()
			return
		}
		relay(c, bc)
	}()
	sinkDone := make(chan int64)
	go func() {
		s, err := back.AcceptTCP()
		if err != nil {
			sinkDone <- 0
			return
		}
		defer s.Close()
		buf := make([]byte, 256<<10)
		var n int64
		for {
			m, err := s.Read(buf)
			n += int64(m)
			if err != nil {
				sinkDone <- n
				return
			}
		}
	}()
	client, err := net.DialTCP("tcp", nil, front.Addr().(*net.TCPAddr))
	if err != nil {
		b.Fatal(err)
	}
	chunk := make([]byte, benchChunk)
	// Warm up: connection set-up and first pipes are not what is measured.
	client.Write(chunk)

	b.SetBytes(benchChunk)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := client.Write(chunk); err != nil {
			b.Fatal(err)
		}
	}
	client.CloseWrite()
	got := <-sinkDone
	b.StopTimer()
	client.Close()
	<-relayed
	if want := int64(b.N+1) * benchChunk; got != want {
		b.Fatalf("sink got %d bytes, want %d", got, want)
	}
}

func BenchmarkRelaySplice(b *testing.B) {
	pool := NewPipePool(PipePoolConfig{Size: 1 << 20, MaxOpen: 16, MaxIdle: 16})
	defer pool.Trim()
	r := NewRelayer(Config{Pipes: pool})
	benchProxy(b, func(c, bc *net.TCPConn) { r.Relay(c, bc, nil) })
}

func BenchmarkRelayCopyFallback(b *testing.B) {
	r := NewRelayer(Config{})
	benchProxy(b, func(c, bc *net.TCPConn) { r.Relay(c, bc, nil) })
}

// BenchmarkIOCopy is the naive Go proxy: io.Copy each way (Go itself
// splices TCP to TCP, holding a pipe per direction for the connection's
// life).
func BenchmarkIOCopy(b *testing.B) {
	benchProxy(b, func(c, bc *net.TCPConn) {
		done := make(chan struct{})
		go func() {
			io.Copy(c, bc)
			c.CloseWrite()
			close(done)
		}()
		io.Copy(bc, c)
		bc.CloseWrite()
		<-done
		c.Close()
		bc.Close()
	})
}
