package accesslog

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/l4lb/l4lb/pkg/syslog"
)

// DefaultQueueSize is how many records the queue holds, all loops
// together, when Config.QueueSize is 0: at 50,000 connections a second,
// a third of a second of lines the writer has not taken yet.
const DefaultQueueSize = 16384

// batchPause is how long the writer lets records gather after a batch
// before it takes the next: the loops then wake it at most this often,
// and each wake-up writes many lines with one write(2).
const batchPause = 10 * time.Millisecond

// dropReportEvery spaces the warnings about dropped records.
const dropReportEvery = 10 * time.Second

// Config sets up an access log.
type Config struct {
	// Format is FormatText or FormatJSON.
	Format string
	// Path is the file lines are appended to, created if missing
	// (mode 0640); "" writes to standard error.
	Path string
	// Out, when set, takes the lines instead of Path (tests).
	Out io.Writer
	// Syslog, when set, takes the records instead of Path or Out: one
	// message each, its body the record's JSON whatever Format says
	// (syslog.go). The Log closes it.
	Syslog *syslog.Writer
	// Loops is the number of event loops the queue serves (ids 0..Loops-1).
	Loops int
	// QueueSize is the records the queue holds, all loops together; 0:
	// DefaultQueueSize.
	QueueSize int
	// Logger gets the writer's own troubles (drops, write errors); nil:
	// discarded.
	Logger *slog.Logger
	// Interval > 0 asks the loops for an interim record of every open
	// connection and session this often; OnConnect for a record when a
	// backend connection is established (Queue.SetEvents).
	Interval  time.Duration
	OnConnect bool
}

// Log is a running access log: the queue the loops push records to and the
// goroutine that formats and writes them. The loops never wait for it.
type Log struct {
	q      *Queue
	format func([]byte, *Record) []byte
	out    io.Writer
	file   *file          // nil unless opened by path
	sys    *syslog.Writer // nil unless the records go to syslog
	chunk  int            // most bytes per write(2): whole lines only
	log    *slog.Logger

	reported int64 // drops already warned about
	warned   time.Time

	stop chan struct{}
	done chan struct{}
}

// Open opens the destination and starts the writer. An error names what
// could not be opened.
func Open(c Config) (*Log, error) {
	l := &Log{log: c.Logger, stop: make(chan struct{}), done: make(chan struct{})}
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
	}
	switch {
	case c.Syslog != nil:
		l.sys, l.format = c.Syslog, AppendJSON
	case c.Format == FormatText:
		l.format = AppendText
	case c.Format == FormatJSON:
		l.format = AppendJSON
	default:
		return nil, fmt.Errorf("access log format %q: use %s or %s", c.Format, FormatText, FormatJSON)
	}
	// Whole lines of at most 4 KiB per write to a stream others write to
	// as well (standard error, which the process log shares): a pipe
	// keeps writes up to PIPE_BUF whole, so lines never interleave. A
	// file of its own takes larger writes.
	l.chunk = 4096
	switch {
	case l.sys != nil:
	case c.Out != nil:
		l.out = c.Out
	case c.Path == "":
		l.out = os.Stderr
	default:
		f, err := openFile(c.Path, l.log)
		if err != nil {
			return nil, err
		}
		l.file, l.out, l.chunk = f, f, 64<<10
	}
	size := c.QueueSize
	if size <= 0 {
		size = DefaultQueueSize
	}
	loops := max(c.Loops, 1)
	l.q = NewQueue(loops, max(size/loops, 1))
	l.q.SetEvents(c.Interval, c.OnConnect)
	go l.run()
	return l, nil
}

// Queue is what the loops push to (relay.Shared.SetAccessLog).
func (l *Log) Queue() *Queue { return l.q }

// Syslog is the syslog writer the records go to; nil for a file or
// standard error.
func (l *Log) Syslog() *syslog.Writer { return l.sys }

// Dropped is the number of records lost: the queue was full (the writer
// fell behind) or writing them failed (syslog's drops included, which
// its Writer counts by reason too).
func (l *Log) Dropped() int64 { return l.q.Dropped() }

// Close writes what is still queued and stops the writer; a file opened
// by path, or the syslog writer, is closed. Detach the queue from the
// loops first (or stop them): a record pushed after Close is never
// written.
func (l *Log) Close() error {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	<-l.done
	if l.sys != nil {
		return l.sys.Close()
	}
	if l.file != nil {
		return l.file.Close()
	}
	return nil
}

func (l *Log) run() {
	defer close(l.done)
	buf := make([]byte, 0, l.chunk)
	add := func(r *Record) {
		buf = l.format(buf, r)
		if len(buf) > l.chunk-maxLine {
			l.write(buf)
			buf = buf[:0]
		}
	}
	if l.sys != nil {
		add = l.sendToSyslog() // buf stays empty
	}
	pause := time.NewTimer(batchPause)
	pause.Stop()
	for {
		n := l.q.Drain(add)
		if len(buf) > 0 {
			l.write(buf)
			buf = buf[:0]
		}
		l.reportDrops(false)
		if n > 0 {
			pause.Reset(batchPause)
			select {
			case <-pause.C:
				continue
			case <-l.stop:
			}
		} else if l.q.Wait(l.stop) {
			continue
		}
		// Stopping: what the loops queued before is written.
		l.q.Drain(add)
		if len(buf) > 0 {
			l.write(buf)
		}
		l.reportDrops(true)
		return
	}
}

// write writes whole lines. When a write fails part-way (a full disk
// takes what fits), the lines it wrote whole are not lost: only those at
// or after the failure count as dropped, a line cut short among them.
func (l *Log) write(b []byte) {
	n, err := l.out.Write(b)
	if err != nil {
		n = min(max(n, 0), len(b))
		l.q.AddDropped(int64(bytes.Count(b[n:], newline)))
		l.warnAtMostEvery("access log write failed", err)
	}
}

var newline = []byte{'\n'}

// reportDrops warns, at most every dropReportEvery (and once more at the
// end), when records were dropped since the last warning.
func (l *Log) reportDrops(final bool) {
	d := l.q.Dropped()
	if d == l.reported || (!final && time.Since(l.warned) < dropReportEvery) {
		return
	}
	l.log.Warn("access log records dropped: the writer fell behind or could not write",
		"dropped", d-l.reported, "dropped_total", d)
	l.reported, l.warned = d, time.Now()
}

func (l *Log) warnAtMostEvery(msg string, err error) {
	if time.Since(l.warned) < dropReportEvery {
		return
	}
	l.log.Warn(msg, "error", err)
	l.warned = time.Now()
}

// ErrClosed is returned by writes to a file after Close.
var ErrClosed = errors.New("access log closed")
