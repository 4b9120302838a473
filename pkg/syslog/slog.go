package syslog

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Handler is a slog.Handler that sends each record as one message of a
// Writer: its severity from the record's level (SeverityOf), its time in
// the header, its body the line slog's text or JSON handler writes for it,
// without the time (the header has it, to the microsecond).
type Handler struct {
	inner slog.Handler
	out   *recordOut // shared with the handlers WithAttrs and WithGroup make
}

// recordOut is the inner handler's writer: the inner handler writes each
// record with one Write, which becomes one message with the severity and
// time Handle set just before.
type recordOut struct {
	mu  sync.Mutex
	w   *Writer
	sev Severity
	t   time.Time
}

func (o *recordOut) Write(p []byte) (int, error) {
	o.w.Send(o.sev, o.t, p)
	return len(p), nil // a dropped message is counted, never an error of the caller's
}

// NewHandler returns a handler sending to w records at level or above,
// as JSON when json is set, else as logfmt text.
func NewHandler(w *Writer, json bool, level slog.Leveler) *Handler {
	out := &recordOut{w: w}
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
		if len(groups) == 0 && a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}
	var inner slog.Handler = slog.NewTextHandler(out, opts)
	if json {
		inner = slog.NewJSONHandler(out, opts)
	}
	return &Handler{inner: inner, out: out}
}

// Writer is the writer the handler sends to (its drops are the process
// log's).
func (h *Handler) Writer() *Writer { return h.out.w }

// Enabled reports whether level is logged.
func (h *Handler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.inner.Enabled(ctx, level)
}

// Handle sends r.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	t := r.Time
	if t.IsZero() {
		t = time.Now()
	}
	h.out.mu.Lock()
	defer h.out.mu.Unlock()
	h.out.sev, h.out.t = SeverityOf(r.Level), t
	return h.inner.Handle(ctx, r)
}

// WithAttrs returns a handler adding attrs to every record.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &Handler{inner: h.inner.WithAttrs(attrs), out: h.out}
}

// WithGroup returns a handler putting later attributes in group name.
func (h *Handler) WithGroup(name string) slog.Handler {
	return &Handler{inner: h.inner.WithGroup(name), out: h.out}
}

// SeverityOf maps a slog level to a severity: error and above are err,
// warn warning, info info, below it debug.
func SeverityOf(l slog.Level) Severity {
	switch {
	case l >= slog.LevelError:
		return SeverityError
	case l >= slog.LevelWarn:
		return SeverityWarning
	case l >= slog.LevelInfo:
		return SeverityInfo
	}
	return SeverityDebug
}
