package relay

// freeList keeps the structs of one kind that a loop's connections take
// and give back (a dial's state, a routed client's route and name), so
// that once a loop has held as many at once, a connection costs no
// allocation of them: on a loop of short connections each allocation is
// a few hundred nanoseconds of the connection's CPU, and garbage. One
// loop only, no locking; it keeps at most maxFree.
type freeList[T any] struct{ free []*T }

// maxFree bounds what a free list keeps: a burst of dials that once ran
// at the same time leaves that much behind for good, and no more.
const maxFree = 256

// get is a zeroed T: one given back, or a new one.
func (f *freeList[T]) get() *T {
	n := len(f.free)
	if n == 0 {
		return new(T)
	}
	p := f.free[n-1]
	f.free[n-1] = nil
	f.free = f.free[:n-1]
	return p
}

// put gives p back, zeroed. Nothing may use p after it.
func (f *freeList[T]) put(p *T) {
	var zero T
	*p = zero
	if len(f.free) < maxFree {
		f.free = append(f.free, p)
	}
}
