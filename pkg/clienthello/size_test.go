package clienthello

import "testing"

// TestPostQuantumHelloSize checks the captures are of the size that broke
// peers: Go's default hello, with its X25519MLKEM768 key share, is over
// 1,200 bytes, more than a small first segment. It logs every capture's
// size (go test -v -run PostQuantumHelloSize).
func TestPostQuantumHelloSize(t *testing.T) {
	captures := goCaptures(t)
	for _, c := range captures {
		t.Logf("%-28s %5d bytes", c.name, len(c.wire))
	}
	if n := len(captures[0].wire); n <= 1200 {
		t.Errorf("Go's default hello is %d bytes: no post-quantum key share?", n)
	}
}
