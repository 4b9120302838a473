// Package rawsys is the one raw-syscall layer of l4lb's data path: the
// socket, epoll and I/O calls the event loops (pkg/reactor), the TCP relay
// (pkg/relay), UDP sessions (pkg/udpsession) and the stream mechanics
// (pkg/splice) make, as raw syscalls.
//
// Raw, because none of them can block: the sockets are non-blocking, and
// a close never lingers (SO_LINGER is only ever set to 0). So they need
// none of the runtime's syscall bookkeeping, which a loop holding its P
// (pkg/reactor, holdp.go) would pay several times per connection, and they
// skip x/sys/unix's allocations (a Sockaddr per connect or accept).
//
// Three rules live here, once:
//
//   - EINTR: every call goes through Retry, which repeats a call a signal
//     interrupted. The exceptions say why where they are: connect
//     (an interrupted TCP connect goes on in the background), and the
//     reactor's waits (epoll_wait, nanosleep), which keep their limits as
//     times and yield to the runtime between tries.
//   - Zero progress: a write asked to move bytes that returns 0 and no
//     error is reported as ErrNoProgress (Progress), so no write loop can
//     spin on it.
//   - The timeout clamp: WaitTimeout turns a timer's distance into an
//     epoll_wait timeout the kernel reads as meant.
//
// It imports nothing of l4lb.
package rawsys
