package dialer

import (
	"context"
	"errors"
	"os"
	"syscall"
)

// Outcome classifies the result of one dial.
type Outcome uint8

const (
	// Success: the connection was established.
	Success Outcome = iota
	// Failure: the backend did not take the connection.
	Failure
	// Local: something on this host stopped the dial; says nothing about
	// the backend.
	Local
)

func (o Outcome) String() string {
	switch o {
	case Success:
		return "success"
	case Failure:
		return "failure"
	default:
		return "local"
	}
}

// localErrnos are shortages of this host, not faults of the peer.
var localErrnos = []syscall.Errno{
	syscall.EMFILE,        // process out of file descriptors
	syscall.ENFILE,        // system out of file descriptors
	syscall.EADDRNOTAVAIL, // no local port left for the destination
	syscall.ENOBUFS,       // no socket buffers
	syscall.ENOMEM,        // no kernel memory
	syscall.EAGAIN,        // connect(2) on a Unix socket or out of ports on some paths
}

// Classify says whether err, returned by a dial, is the backend's fault.
func Classify(err error) Outcome {
	if err == nil {
		return Success
	}
	if IsLocal(err) {
		return Local
	}
	return Failure
}

// IsLocal reports whether err is local trouble: a shortage of this host or
// a dial called off by its caller (context canceled). A dial that ran out
// of its connect timeout is the backend's fault, not local.
func IsLocal(err error) bool {
	if errors.Is(err, context.Canceled) {
		return true
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		return false
	}
	for _, e := range localErrnos {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// IsTimeout reports whether a dial failed by running out of time (the
// connect timeout, or the kernel's own SYN retries).
func IsTimeout(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) ||
		errors.Is(err, syscall.ETIMEDOUT)
}
