package flow

// Refused names, by their index in a batch, the records the receiving
// process would not take (it has no such listener, pool or backend, or
// could not watch their sockets): they stay with the sender.
type Refused struct {
	Relays   []int `json:"relays,omitempty"`
	Queued   []int `json:"queued,omitempty"`
	Sessions []int `json:"sessions,omitempty"`
}

// Len is the number of refused records.
func (r Refused) Len() int { return len(r.Relays) + len(r.Queued) + len(r.Sessions) }

// All refuses every record of b.
func All(b *Batch) Refused {
	var r Refused
	for i := range b.Relays {
		r.Relays = append(r.Relays, i)
	}
	for i := range b.Queued {
		r.Queued = append(r.Queued, i)
	}
	for i := range b.Sessions {
		r.Sessions = append(r.Sessions, i)
	}
	return r
}

// Split takes the records r names out of b into a batch of their own,
// with their descriptors, and returns it and the descriptors of the other
// records (the ones the receiver took). Indexes b does not have are
// ignored.
func (b *Batch) Split(r Refused) (refused *Batch, taken []int) {
	refused = b.Take(r)
	moved := make(map[int]bool, len(refused.FDs))
	for _, fd := range refused.FDs {
		moved[fd] = true
	}
	for _, fd := range b.FDs {
		if !moved[fd] {
			taken = append(taken, fd)
		}
	}
	return refused, taken
}

// Take returns a batch of the records r names, their descriptors with
// them, renumbered; b is left as it is. Indexes b does not have are
// ignored.
func (b *Batch) Take(r Refused) *Batch {
	out := &Batch{}
	move := func(fds []*int) {
		for _, p := range fds {
			if fd, ok := b.FD(*p); ok && fd >= 0 {
				*p = out.AddFD(fd)
			} else {
				*p = NoFD
			}
		}
	}
	for _, i := range r.Relays {
		if i >= 0 && i < len(b.Relays) {
			rec := b.Relays[i]
			move(rec.fds())
			for _, st := range rec.Streams {
				out.HeldBytes += len(st.Held)
			}
			out.Relays = append(out.Relays, rec)
		}
	}
	for _, i := range r.Queued {
		if i >= 0 && i < len(b.Queued) {
			rec := b.Queued[i]
			move([]*int{&rec.ClientFD})
			out.Queued = append(out.Queued, rec)
		}
	}
	for _, i := range r.Sessions {
		if i >= 0 && i < len(b.Sessions) {
			rec := b.Sessions[i]
			move([]*int{&rec.FD})
			out.Sessions = append(out.Sessions, rec)
		}
	}
	return out
}

// Halves splits b's records into two batches of about half each (a batch
// too large for one message goes as two).
func (b *Batch) Halves() (first, second *Batch) {
	var r1, r2 Refused
	half := func(n int, list1, list2 *[]int) {
		for i := range n {
			if i < (n+1)/2 {
				*list1 = append(*list1, i)
			} else {
				*list2 = append(*list2, i)
			}
		}
	}
	// The largest kind is halved, the others go whole to the second half,
	// so both halves get records.
	all, total := All(b), b.Len()
	switch {
	case len(b.Relays)*2 >= total:
		half(len(b.Relays), &r1.Relays, &r2.Relays)
		r2.Queued, r2.Sessions = all.Queued, all.Sessions
	case len(b.Sessions)*2 >= total:
		half(len(b.Sessions), &r1.Sessions, &r2.Sessions)
		r2.Relays, r2.Queued = all.Relays, all.Queued
	default:
		half(len(b.Queued), &r1.Queued, &r2.Queued)
		r2.Relays, r2.Sessions = all.Relays, all.Sessions
	}
	return b.Take(r1), b.Take(r2)
}

// FDsOf returns the descriptors the records r names, as Split would move
// them.
func (b *Batch) FDsOf(r Refused) []int { return b.Take(r).FDs }

// fds are pointers to the relay's descriptor fields.
func (r *Relay) fds() []*int {
	return []*int{&r.ClientFD, &r.BackendFD, &r.Streams[0].PipeR, &r.Streams[0].PipeW, &r.Streams[1].PipeR, &r.Streams[1].PipeW}
}
