package splice

import (
	"errors"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/pkg/flow"
)

// A stream in a binary upgrade's hand-over (pkg/flow): the old process's
// loop detaches it, the new process's loop adopts it, and the bytes it
// held in flight go with it, in order: a pipe travels as its descriptors
// (never read out: it may hold a megabyte), copied bytes as bytes.

// Detach takes the stream apart for a hand-over and returns its state,
// PipeR and PipeW being the pipe's own descriptors (not indexes; NoFD:
// none), which leave the pool's count but stay open: the caller closes
// them once the next process holds them, or adopts them back. The stream
// is empty afterwards.
func (s *Stream) Detach(sc *Scratch) flow.Stream {
	st := flow.Stream{Delivered: s.Delivered, EOF: s.eof, Streaming: s.streaming, Urgent: s.Urgent,
		PipeR: flow.NoFD, PipeW: flow.NoFD}
	if s.p != nil {
		if s.inPipe > 0 {
			st.PipeR, st.PipeW, st.InPipe = s.p.r, s.p.w, s.inPipe
			if sc.Pipes != nil {
				sc.Pipes.pool.open.Add(-1)
			}
		} else if sc.Pipes != nil {
			sc.Pipes.put(s.p) // empty: stays here
		} else {
			s.p.close()
		}
		s.p, s.inPipe = nil, 0
	}
	if s.hStart < s.hEnd {
		st.Held = append([]byte(nil), (*s.held)[s.hStart:s.hEnd]...)
	}
	if s.held != nil {
		putBuffer(s.held)
		s.held, s.hStart, s.hEnd = nil, 0, 0
	}
	*s = Stream{}
	return st
}

// Adopt makes the stream what st describes (Detach's result, its pipe
// descriptors this process's own now): it delivers what st held before it
// reads anything more. A pipe counts in the pool from now, above its cap
// if need be: its bytes must go out. Held bytes larger than the copy
// buffer are refused; Detach never makes them.
func (s *Stream) Adopt(st flow.Stream, sc *Scratch) error {
	if len(st.Held) > bufferSize || (st.InPipe > 0) != (st.PipeR >= 0) || (len(st.Held) > 0 && st.InPipe > 0) {
		return errBadStream
	}
	*s = Stream{Delivered: st.Delivered, eof: st.EOF, streaming: st.Streaming, Urgent: st.Urgent}
	if st.InPipe > 0 {
		size, err := unix.FcntlInt(uintptr(st.PipeW), unix.F_GETPIPE_SZ, 0)
		if err != nil {
			return err
		}
		s.p, s.inPipe = &pipe{r: st.PipeR, w: st.PipeW, size: size}, st.InPipe
		if sc.Pipes != nil {
			sc.Pipes.pool.open.Add(1)
		}
	}
	if len(st.Held) > 0 {
		s.keep(st.Held)
	}
	return nil
}

// errBadStream: a hand-over's stream that Detach cannot have made.
var errBadStream = errors.New("splice: a handed-over stream holds bytes in two places, or more than a buffer")
