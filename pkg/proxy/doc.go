// Package proxy is l4lb's TCP data path: it accepts clients on the
// listeners, enforces the global connection cap, connects each client to a
// backend of its pool and relays until both sides are done. It also drains
// on shutdown: stop accepting, give open relays a deadline, then close what
// is left.
package proxy
