package clienthello

// Reader is Inspect for one goroutine (an event loop) that inspects one
// hello after another and keeps what they share, so that a hello costs
// no allocation once the names it carries were seen: the server names
// and protocols it read (each a string made once, then handed out again)
// and the memory of the slices it returns. Its zero value interns
// nothing and reuses nothing (the package's Inspect); NewReader's does
// both. The Hello an Inspect returns is valid until the Reader's next:
// its ALPN and SupportedVersions are the Reader's, written over then.
type Reader struct {
	names    map[string]string // nil: no interning
	protos   []string
	versions []uint16
	body     []byte // a hello cut into several records, put back together
}

// maxInterned bounds the names a Reader keeps: past it, it forgets them
// all and starts again, so that clients naming ever new servers cost an
// allocation each, as without a Reader, and no more memory.
const maxInterned = 1024

// maxInternedProtos: the protocols of a hello offering more than this
// many (clients offer two or three) are not interned, so that one hello
// cannot make the Reader forget every server name.
const maxInternedProtos = 8

// NewReader returns a Reader that reuses its memory and interns names.
func NewReader() *Reader { return &Reader{names: make(map[string]string)} }

// intern is b as a string: the one made when b was first seen.
func (r *Reader) intern(b []byte) string {
	if r.names == nil {
		return string(b)
	}
	if s, ok := r.names[string(b)]; ok { // the compiler makes no string for the lookup
		return s
	}
	if len(r.names) >= maxInterned {
		clear(r.names)
	}
	s := string(b)
	r.names[s] = s
	return s
}

// reused is an empty slice for n elements: kept's memory, if r reuses
// and kept has room.
func reused[T any](r *Reader, kept []T, n int) []T {
	if r.names == nil || cap(kept) < n {
		return make([]T, 0, n)
	}
	return kept[:0]
}

// bodyOf is a buffer for a hello body of n bytes: the Reader's, if it
// reuses.
func (r *Reader) bodyOf(n int) []byte {
	if r.names == nil {
		return make([]byte, n)
	}
	if cap(r.body) < n {
		r.body = make([]byte, n)
	}
	return r.body[:n]
}
