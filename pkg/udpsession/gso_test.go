package udpsession

import (
	"bytes"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestGSORunTakesEqualSizesWithAShorterLast(t *testing.T) {
	tests := []struct {
		name  string
		sizes []int
		want  int
		ok    bool
	}{
		{"equal", []int{100, 100, 100}, 100, true},
		{"shorter last", []int{100, 100, 40}, 100, true},
		{"two", []int{64, 64}, 64, true},
		{"one alone", []int{100}, 0, false},
		{"longer last", []int{100, 100, 101}, 0, false},
		{"unequal middle", []int{100, 90, 100}, 0, false},
		{"empty datagram first", []int{0, 0}, 0, false},
		{"empty datagram last", []int{100, 0}, 0, false},
		{"over 64 KiB together", []int{9000, 9000, 9000, 9000, 9000, 9000, 9000, 9000}, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			size, ok := gsoRun(batchOf(tc.sizes), 0, len(tc.sizes))
			if ok != tc.ok || size != tc.want {
				t.Errorf("gsoRun(%v) = %d, %v; want %d, %v", tc.sizes, size, ok, tc.want, tc.ok)
			}
		})
	}
	many := make([]int, maxGSOSegments+1)
	for i := range many {
		many[i] = 10
	}
	if _, ok := gsoRun(batchOf(many), 0, len(many)); ok {
		t.Errorf("%d segments accepted for one send, above %d", len(many), maxGSOSegments)
	}
}

func batchOf(sizes []int) *mmsgBatch {
	b := &mmsgBatch{}
	for i, n := range sizes {
		if i < len(b.hdrs) {
			b.hdrs[i].Len = uint32(n)
		}
	}
	return b
}

func TestSendGSODeliversTheSameDatagrams(t *testing.T) {
	rx, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	fd, err := connectUDP(rx.LocalAddr().(*net.UDPAddr).AddrPort())
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	var want [][]byte
	var iovs []unix.Iovec
	for i := range 5 {
		n := 300
		if i == 4 {
			n = 120
		}
		p := bytes.Repeat([]byte{byte('a' + i)}, n)
		want = append(want, p)
		var v unix.Iovec
		v.Base = &p[0]
		v.SetLen(n)
		iovs = append(iovs, v)
	}
	if err, unsupported := sendGSO(fd, iovs, 300); err != nil {
		if unsupported {
			t.Skipf("this kernel has no UDP GSO: %v", err)
		}
		t.Fatal(err)
	}
	buf := make([]byte, 2048)
	for i, w := range want {
		rx.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, err := rx.Read(buf)
		if err != nil {
			t.Fatalf("datagram %d: %v", i, err)
		}
		if !bytes.Equal(buf[:n], w) {
			t.Fatalf("datagram %d: got %d bytes %q..., want %d bytes of %q", i, n, buf[:1], len(w), w[:1])
		}
	}
}
