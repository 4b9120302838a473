package splice

import (
	"errors"
	"io"
	"net"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// direction moves bytes one way: src to dst.
type direction struct {
	s         *session
	toBackend bool // client to backend; decides which end a failure blames
	meter     *atomic.Int64
	n         int64  // bytes delivered to dst
	firstByte func() // called once after n first grows; nil: nobody asked
	firstSeen bool   // n has grown; firstByte is due
	streaming bool   // the last read was large: splice the next one

	// Raw (TCP to TCP) path.
	src, dst rawConn
	dstConn  net.Conn
	readFn   func(fd uintptr) bool // bound once: no allocation per wait
	writeFn  func(fd uintptr) bool
	p        *pipe
	inPipe   int
	buf      *[]byte
	bufStart int
	bufEnd   int
	eof      bool
	rerr     error
	werr     error

	// Copy path (either end not TCP).
	srcConn net.Conn
}

func (d *direction) initRaw(s *session, src, dst rawConn, dstConn net.Conn, meter *atomic.Int64, toBackend bool) {
	*d = direction{s: s, src: src, dst: dst, dstConn: dstConn, meter: meter, toBackend: toBackend}
	d.readFn = d.fill
	d.writeFn = d.drain
}

func (d *direction) initCopy(s *session, src, dst net.Conn, meter *atomic.Int64, toBackend bool) {
	*d = direction{s: s, srcConn: src, dstConn: dst, meter: meter, toBackend: toBackend}
}

func (d *direction) run() {
	if d.src == nil {
		d.runCopy()
		return
	}
	defer d.release()
	for {
		if err := d.src.Read(d.readFn); err != nil {
			d.s.abort(Aborted, nil, false, false)
			return
		}
		if d.rerr != nil {
			// A read error means the source end broke (RST, or an error
			// such as a keepalive timeout).
			d.s.brokenEnd(d.toBackend, d.rerr)
			return
		}
		if d.eof {
			// The last direction to end needs no half-close: the close
			// that ends the relay sends the FIN, one syscall fewer.
			if d.s.ended.Add(1) == 1 {
				closeWrite(d.dstConn)
			}
			return
		}
		// fill counted the bytes it read as in flight (and as activity).
		err := d.dst.Write(d.writeFn)
		d.s.inFlight.Add(-1)
		d.fireFirstByte()
		if err != nil {
			d.s.abort(Aborted, nil, false, false)
			return
		}
		if d.werr != nil {
			d.s.brokenEnd(!d.toBackend, d.werr)
			return
		}
		if (d.p != nil) != d.streaming {
			d.release() // the next read switches between splice and copy
		}
	}
}

// streamThreshold is the read size from which a direction counts as
// streaming and splices; below it, it copies. A small message (a request,
// a reply, a keystroke) is cheaper to read and write than to move through
// a pipe taken from the pool (bench: -12% added latency per round trip);
// a stream is spliced, zero-copy.
const streamThreshold = 16 << 10

// fill runs under the source's read lock. It takes a pipe (or, failing
// that, a buffer) only when it is about to read, and gives it back when the
// source would block, so a waiting direction holds nothing.
func (d *direction) fill(fd uintptr) bool {
	if d.p == nil && d.buf == nil {
		if d.streaming {
			d.p = d.s.r.pipes.get()
		}
		if d.p == nil {
			d.buf = getBuffer()
		}
	}
	// In flight from before the read: an idle timeout firing during the
	// syscall must see that bytes may be on their way, and reset rather
	// than close with a FIN that would pass for a complete stream.
	d.s.inFlight.Add(1)
	for {
		var n int
		var err error
		if d.p != nil {
			var n64 int64
			n64, err = spliceCall(int(fd), d.p.w, d.p.size)
			n = int(n64)
		} else {
			n, err = unix.Read(int(fd), *d.buf)
		}
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			d.s.inFlight.Add(-1)
			d.release()
			return false
		case err != nil:
			d.s.inFlight.Add(-1)
			d.rerr = err
		case n == 0:
			d.s.inFlight.Add(-1)
			d.eof = true
		default:
			if d.p != nil {
				d.inPipe = n
			} else {
				d.bufStart, d.bufEnd = 0, n
			}
			d.streaming = n >= streamThreshold
			d.s.touch()
		}
		return true
	}
}

// drain runs under the destination's write lock and writes out everything
// fill read.
func (d *direction) drain(fd uintptr) bool {
	for {
		var n int
		var err error
		if d.p != nil {
			if d.inPipe == 0 {
				return true
			}
			var n64 int64
			n64, err = spliceCall(d.p.r, int(fd), d.inPipe)
			n = int(n64)
		} else {
			if d.bufStart == d.bufEnd {
				return true
			}
			n, err = unix.Write(int(fd), (*d.buf)[d.bufStart:d.bufEnd])
		}
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return false
		case err != nil:
			d.werr = err
			return true
		}
		if d.p != nil {
			d.inPipe -= n
			d.s.r.spliced.Add(int64(n))
		} else {
			d.bufStart += n
			d.s.r.copied.Add(int64(n))
		}
		d.delivered(n)
	}
}

// delivered accounts n bytes written to dst. Progress is activity: a
// slow reader draining a full pipe is not idle.
func (d *direction) delivered(n int) {
	if n <= 0 {
		return
	}
	d.n += int64(n)
	if d.meter != nil {
		d.meter.Add(int64(n))
	}
	d.s.touch()
	d.firstSeen = d.firstByte != nil
}

// fireFirstByte calls the first-byte hook once it is due. It runs outside
// the socket callbacks: the hook may wait on a breaker Store.
func (d *direction) fireFirstByte() {
	if d.firstSeen {
		f := d.firstByte
		d.firstByte, d.firstSeen = nil, false
		f()
	}
}

// release hands the pipe or buffer back. A pipe that still holds bytes
// (the relay was cut short) cannot be reused and is closed.
func (d *direction) release() {
	if d.p != nil {
		if d.inPipe == 0 {
			d.s.r.pipes.put(d.p)
		} else {
			d.s.r.pipes.discard(d.p)
		}
		d.p, d.inPipe = nil, 0
	}
	if d.buf != nil {
		putBuffer(d.buf)
		d.buf, d.bufStart, d.bufEnd = nil, 0, 0
	}
}

// spliceCall moves up to max bytes from in to out without blocking.
func spliceCall(in, out, max int) (int64, error) {
	n, err := unix.Splice(in, nil, out, nil, max, unix.SPLICE_F_NONBLOCK)
	return int64(n), err
}

// runCopy is the path for connections that are not both TCP. It blocks in
// Read with a pooled buffer.
func (d *direction) runCopy() {
	bp := getBuffer()
	defer putBuffer(bp)
	buf := *bp
	for {
		nr, rerr := d.srcConn.Read(buf)
		if nr > 0 {
			d.s.touch()
			d.s.inFlight.Add(1)
			nw, werr := d.dstConn.Write(buf[:nr])
			d.s.inFlight.Add(-1)
			d.s.r.copied.Add(int64(nw))
			d.delivered(nw)
			d.fireFirstByte()
			if werr != nil {
				d.copyFailed(!d.toBackend, werr)
				return
			}
		}
		if rerr == io.EOF {
			if !closeWrite(d.dstConn) {
				// Without half-close the only way to pass EOF on is to
				// end the whole relay.
				d.s.abort(Completed, nil, false, false)
			}
			return
		}
		if rerr != nil {
			d.copyFailed(d.toBackend, rerr)
			return
		}
	}
}

func (d *direction) copyFailed(clientSide bool, err error) {
	if errors.Is(err, net.ErrClosed) {
		d.s.abort(Aborted, nil, false, false)
		return
	}
	d.s.brokenEnd(clientSide, err)
}
