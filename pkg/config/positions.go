package config

import (
	"strconv"
	"strings"
)

// positions maps canonical keys (see keypath.go) to the 1-based line where
// they are written. BurntSushi/toml keeps key positions to itself, so the
// source is scanned again here. The scan runs only on text the TOML parser
// has already accepted, so it can be lenient: it never fails, and on input
// it does not understand it skips to the next line.
type positions struct {
	lines map[string]int
}

// line returns where key is written. A key that is not written (a missing
// required key, an implicit table) gets the line of the nearest enclosing
// table that is, where a table not written itself is located by the first
// line inside it; else 0.
func (p *positions) line(key string) int {
	if p == nil {
		return 0
	}
	for _, k := range append([]string{key}, keyAncestors(key)...) {
		if n, ok := p.lines[k]; ok {
			return n
		}
		if n := p.firstLineWithin(k); n > 0 {
			return n
		}
	}
	return 0
}

func (p *positions) firstLineWithin(key string) int {
	first := 0
	for k, n := range p.lines {
		if len(k) > len(key) && strings.HasPrefix(k, key) && (k[len(key)] == '.' || k[len(key)] == '[') {
			if first == 0 || n < first {
				first = n
			}
		}
	}
	return first
}

// locate scans TOML source and records the line of every key, table header
// and array element.
func locate(src []byte) *positions {
	s := &scanner{src: src, line: 1, pos: &positions{lines: map[string]int{}}, arrays: map[string]int{}}
	s.document()
	return s.pos
}

type scanner struct {
	src    []byte
	i      int
	line   int
	pos    *positions
	arrays map[string]int // canonical key of each [[array]] table -> elements so far
	table  string         // canonical key of the current table
}

func (s *scanner) eof() bool { return s.i >= len(s.src) }

func (s *scanner) peek() byte {
	if s.eof() {
		return 0
	}
	return s.src[s.i]
}

func (s *scanner) peekAt(off int) byte {
	if s.i+off >= len(s.src) {
		return 0
	}
	return s.src[s.i+off]
}

func (s *scanner) advance() {
	if s.eof() {
		return
	}
	if s.src[s.i] == '\n' {
		s.line++
	}
	s.i++
}

func (s *scanner) record(key string, line int) {
	if _, ok := s.pos.lines[key]; !ok {
		s.pos.lines[key] = line
	}
}

func (s *scanner) skipBlanks() {
	for c := s.peek(); c == ' ' || c == '\t'; c = s.peek() {
		s.advance()
	}
}

// skipBlanksLinesComments skips everything that carries no value, as allowed
// between array elements and at the top level.
func (s *scanner) skipBlanksLinesComments() {
	for !s.eof() {
		switch s.peek() {
		case ' ', '\t', '\r', '\n':
			s.advance()
		case '#':
			s.skipLine()
		default:
			return
		}
	}
}

// skipLine moves past the next newline (or to the end).
func (s *scanner) skipLine() {
	for !s.eof() {
		c := s.peek()
		s.advance()
		if c == '\n' {
			return
		}
	}
}

func (s *scanner) document() {
	for {
		s.skipBlanksLinesComments()
		if s.eof() {
			return
		}
		start := s.i
		if s.peek() == '[' {
			s.header()
		} else {
			s.keyValue(s.table)
		}
		// Whatever follows a statement on its line is a comment in valid
		// TOML; skipping it also guarantees progress on text not understood.
		if s.i == start || !s.atLineStart() {
			s.skipLine()
		}
	}
}

func (s *scanner) atLineStart() bool { return s.i == 0 || s.src[s.i-1] == '\n' }

// header handles "[a.b]" and "[[a.b]]", making it the current table.
func (s *scanner) header() {
	line := s.line
	s.advance()
	isArray := s.peek() == '['
	if isArray {
		s.advance()
	}
	s.skipBlanks()
	parts, ok := s.key()
	if !ok {
		return
	}
	key := ""
	for n, part := range parts {
		key = joinKey(key, part)
		last := n == len(parts)-1
		count, known := s.arrays[key]
		switch {
		case last && isArray:
			s.arrays[key] = count + 1
			s.record(key, line)
			key = indexKey(key, count)
		case known && count > 0:
			// A header below an array of tables extends its latest element.
			key = indexKey(key, count-1)
		}
	}
	s.record(key, line)
	s.table = key
}

// keyValue handles "a.b = value" inside table, recording every dotted prefix.
func (s *scanner) keyValue(table string) {
	line := s.line
	parts, ok := s.key()
	if !ok {
		return
	}
	key := table
	for _, part := range parts {
		key = joinKey(key, part)
		s.record(key, line)
	}
	s.skipBlanks()
	if s.peek() != '=' {
		return
	}
	s.advance()
	s.skipBlanks()
	s.value(key)
}

// key reads a possibly dotted, possibly quoted key.
func (s *scanner) key() ([]string, bool) {
	var parts []string
	for {
		s.skipBlanks()
		part, ok := s.keyPart()
		if !ok {
			return nil, false
		}
		parts = append(parts, part)
		s.skipBlanks()
		if s.peek() != '.' {
			return parts, true
		}
		s.advance()
	}
}

func (s *scanner) keyPart() (string, bool) {
	switch s.peek() {
	case '"':
		raw := s.basicString()
		if v, err := strconv.Unquote(raw); err == nil {
			return v, true
		}
		return strings.Trim(raw, `"`), true
	case '\'':
		raw := s.literalString()
		return strings.Trim(raw, `'`), true
	}
	start := s.i
	for isBareKeyByte(s.peek()) {
		s.advance()
	}
	return string(s.src[start:s.i]), s.i > start
}

// value skips one value, recording the keys inside inline tables and the
// elements of arrays under key.
func (s *scanner) value(key string) {
	switch c := s.peek(); {
	case c == '"' && s.peekAt(1) == '"' && s.peekAt(2) == '"':
		s.multiLineString('"')
	case c == '\'' && s.peekAt(1) == '\'' && s.peekAt(2) == '\'':
		s.multiLineString('\'')
	case c == '"':
		s.basicString()
	case c == '\'':
		s.literalString()
	case c == '[':
		s.array(key)
	case c == '{':
		s.inlineTable(key)
	default:
		s.scalar()
	}
}

// basicString reads "..." and returns it with its quotes.
func (s *scanner) basicString() string {
	start := s.i
	s.advance()
	for !s.eof() {
		switch s.peek() {
		case '\\':
			s.advance()
			if s.peek() == '\n' {
				return string(s.src[start:s.i])
			}
		case '"':
			s.advance()
			return string(s.src[start:s.i])
		case '\n':
			return string(s.src[start:s.i])
		}
		s.advance()
	}
	return string(s.src[start:s.i])
}

// literalString reads '...' and returns it with its quotes.
func (s *scanner) literalString() string {
	start := s.i
	s.advance()
	for !s.eof() && s.peek() != '\n' {
		if s.peek() == '\'' {
			s.advance()
			break
		}
		s.advance()
	}
	return string(s.src[start:s.i])
}

// multiLineString skips a multi-line string (three quotes of kind q at
// each end), which may hold newlines and end in up to two extra quotes.
func (s *scanner) multiLineString(q byte) {
	s.advance()
	s.advance()
	s.advance()
	for !s.eof() {
		if q == '"' && s.peek() == '\\' {
			s.advance()
			s.advance()
			continue
		}
		if s.peek() == q && s.peekAt(1) == q && s.peekAt(2) == q {
			s.advance()
			s.advance()
			s.advance()
			for extra := 0; extra < 2 && s.peek() == q; extra++ {
				s.advance()
			}
			return
		}
		s.advance()
	}
}

func (s *scanner) array(key string) {
	s.advance()
	for n := 0; ; {
		s.skipBlanksLinesComments()
		switch s.peek() {
		case 0:
			return
		case ']':
			s.advance()
			return
		case ',':
			s.advance()
			continue
		}
		start := s.i
		elem := indexKey(key, n)
		s.record(elem, s.line)
		s.value(elem)
		n++
		if s.i == start {
			s.advance() // not a value: step over it rather than loop
		}
	}
}

func (s *scanner) inlineTable(key string) {
	s.advance()
	for {
		s.skipBlanksLinesComments()
		switch s.peek() {
		case 0:
			return
		case '}':
			s.advance()
			return
		case ',':
			s.advance()
			continue
		}
		start := s.i
		s.keyValue(key)
		if s.i == start {
			s.advance()
		}
	}
}

// scalar skips a number, boolean or date-time. A date-time may contain one
// space between its date and time.
func (s *scanner) scalar() {
	start := s.i
	for !s.eof() {
		switch s.peek() {
		case ' ':
			if !(s.i-start == 10 && isDigit(s.peekAt(1)) && s.src[start+4] == '-') {
				return
			}
		case '\t', '\r', '\n', ',', ']', '}', '#':
			return
		}
		s.advance()
	}
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
