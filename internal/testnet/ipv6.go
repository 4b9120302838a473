package testnet

import (
	"net"
	"sync"
)

// HasIPv6 reports whether this host can bind IPv6 loopback.
var HasIPv6 = sync.OnceValue(func() bool {
	ln, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		return false
	}
	ln.Close()
	return true
})
