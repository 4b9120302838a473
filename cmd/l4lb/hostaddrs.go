package main

import (
	"net"
	"net/netip"
)

// hostAddrs returns a test for this host's own interface addresses, read
// once at start: the data path checks connections between local addresses
// for loops back into l4lb.
func hostAddrs() func(netip.Addr) bool {
	set := map[netip.Addr]struct{}{}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(n.IP); ok {
					set[ip.Unmap()] = struct{}{}
				}
			}
		}
	}
	return func(a netip.Addr) bool {
		_, ok := set[a.Unmap()]
		return ok
	}
}
