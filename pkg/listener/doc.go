// Package listener opens the TCP and UDP listening sockets of the event
// loops (one per loop, SO_REUSEPORT) and adopts inherited ones (an
// upgrade's, systemd's socket activation).
//
// Bind turns one configured address into several sockets bound with
// SO_REUSEPORT, one per event loop, so the kernel spreads new connections
// over them and no single accept queue is a bottleneck. They are raw
// non-blocking fds: each loop (pkg/relay) registers its own in its epoll set
// and accepts on it, with the back-off after accept failures (out of file
// descriptors or kernel memory) and the connection cap; Go's netpoller
// never sees them.
//
// Before binding, Bind makes a plain bind on the address: if something
// already listens there (another l4lb, say) start-up fails, rather than
// joining that socket's reuseport group and taking a share of its
// connections. The plain bind also collides with l4lb's own sockets on an
// overlapping address of the port, which a reload or an upgrade moving a
// listener ("127.0.0.1:P" to "0.0.0.0:P", or back) still holds while its
// new sockets are bound: BindOwn and BindUDPOwn are told those sockets
// (Own, own.go), look the port's holders up in /proc, and refuse only a
// socket that is not one of them. Port 0 picks a free port, shared by all
// the sockets. The backlog is set with listen(2) itself (0: the kernel's
// somaxconn). IPv6 sockets are IPv6-only, so "[::]:P" can sit beside
// "0.0.0.0:P". Accepted sockets inherit TCP_NODELAY from their listener
// and get no keepalive: dead peers are found by the idle timeout.
//
// Inherited sockets (inherit.go) come open from the l4lb this process
// replaces (a binary upgrade) or from systemd (LISTEN_FDS): Describe says
// what each is (protocol and bound address, from the socket itself), an
// InheritedSet hands them to the listeners bound to the same address, and
// Adopt and AdoptUDP give them what Bind and BindUDP would have set. They
// are served as they are, never closed and bound again: each SO_REUSEPORT
// socket has an accept queue of its own, and closing one resets the
// clients queued on it.
package listener
