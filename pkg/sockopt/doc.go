// Package sockopt holds the socket options an operator tunes per listener
// and per pool, applied to raw file descriptors: today TCP keepalive, which
// finds peers that vanished behind a NAT or a dead link without waiting for
// an idle timeout.
package sockopt
