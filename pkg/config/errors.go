package config

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// ErrInvalid is matched (errors.Is) by every Errors value, so a caller can
// tell a bad file from a file it could not read.
var ErrInvalid = errors.New("invalid configuration")

// Error is one problem in a configuration file.
type Error struct {
	File string // as given to Parse or Load
	Line int    // 1-based; 0 when the problem has no single line
	Key  string // dotted key, e.g. pool.web.backend[1].weight; "" for syntax errors
	Msg  string
}

// Error formats the problem as "FILE:LINE: KEY: MSG", leaving out the parts
// that are unknown.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		if b.Len() > 0 {
			b.WriteByte(':')
		} else {
			b.WriteString("line ")
		}
		b.WriteString(strconv.Itoa(e.Line))
	}
	if e.Key != "" {
		if b.Len() > 0 {
			b.WriteString(": ")
		}
		b.WriteString(e.Key)
	}
	if b.Len() > 0 {
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is every problem found in one file, sorted by line (problems
// without a line come last).
type Errors []*Error

// Error joins the problems with newlines.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Is reports whether target is ErrInvalid.
func (es Errors) Is(target error) bool { return target == ErrInvalid }

// Unwrap exposes each problem, so errors.As can find an *Error.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

func (es Errors) sort() {
	sort.SliceStable(es, func(i, j int) bool {
		li, lj := es[i].Line, es[j].Line
		if (li == 0) != (lj == 0) {
			return lj == 0
		}
		return li < lj
	})
}

// collector gathers problems while a file is walked, attaching the file name
// and the line of each key.
type collector struct {
	file string
	pos  *positions
	errs Errors
}

// add records a problem with key, located at key's own line.
func (c *collector) add(key string, format string, args ...any) {
	c.addAt(c.pos.line(key), key, format, args...)
}

// written reports whether the file itself writes key (rather than leaving
// it at its default).
func (c *collector) written(key string) bool {
	if c.pos == nil {
		return false
	}
	_, ok := c.pos.lines[key]
	return ok
}

// addAt records a problem with key at an explicit line.
func (c *collector) addAt(line int, key string, format string, args ...any) {
	c.errs = append(c.errs, &Error{File: c.file, Line: line, Key: key, Msg: fmt.Sprintf(format, args...)})
}
