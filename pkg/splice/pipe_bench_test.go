package splice

import (
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkPipeGetPut takes a pipe and gives it back, from as many
// goroutines as GOMAXPROCS, each standing for a loop: the cost of the
// pool on every streaming burst, and how it scales across loops.
func BenchmarkPipeGetPut(b *testing.B) {
	pool := NewPipePool(PipePoolConfig{Size: 64 << 10, MaxOpen: 256, MaxIdle: 32})
	b.RunParallel(func(pb *testing.PB) {
		get, put, done := benchPipes(pool)
		defer done()
		for pb.Next() {
			p := get()
			if p == nil {
				b.Error("no pipe")
				return
			}
			put(p)
		}
	})
}

// BenchmarkStreamBurst relays 64 KiB bursts through a Stream, spliced,
// from as many goroutines as GOMAXPROCS, each with its own socket pairs
// and scratch as a loop has: each burst takes a pipe from the pool and
// gives it back once the source is drained.
func BenchmarkStreamBurst(b *testing.B) {
	pool := NewPipePool(PipePoolConfig{Size: 64 << 10, MaxOpen: 256, MaxIdle: 32})
	b.SetBytes(64 << 10)
	b.RunParallel(func(pb *testing.PB) {
		src, srcPeer := benchPair(b)
		dst, dstPeer := benchPair(b)
		defer closeAll(src, srcPeer, dst, dstPeer)
		sc := NewScratch(pool)
		defer benchScratchDone(sc)
		var s Stream
		defer s.Release(sc)
		burst := make([]byte, 64<<10)
		sink := make([]byte, 64<<10)
		for pb.Next() {
			if _, err := unix.Write(srcPeer, burst); err != nil {
				b.Error(err)
				return
			}
			readable, writable := true, true
			for got := 0; got < len(burst); {
				if _, err := s.Move(src, dst, &readable, &writable, 1<<20, sc); err != nil {
					b.Error(err)
					return
				}
				for {
					n, err := unix.Read(dstPeer, sink)
					if n <= 0 || err != nil {
						break
					}
					got += n
				}
				readable, writable = true, true
			}
		}
	})
}

func benchPair(b *testing.B) (int, int) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	return fds[0], fds[1]
}

func closeAll(fds ...int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}
