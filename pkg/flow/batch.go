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
	refused = &Batch{}
	keep := make(map[int]bool)
	move := func(fds []*int) {
		for _, p := range fds {
			if fd, ok := b.FD(*p); ok && fd >= 0 {
				keep[*p] = true
				*p = refused.AddFD(fd)
			} else {
				*p = NoFD
			}
		}
	}
	for _, i := range r.Relays {
		if i >= 0 && i < len(b.Relays) {
			rec := b.Relays[i]
			move(rec.fds())
			refused.Relays = append(refused.Relays, rec)
		}
	}
	for _, i := range r.Queued {
		if i >= 0 && i < len(b.Queued) {
			rec := b.Queued[i]
			move([]*int{&rec.ClientFD})
			refused.Queued = append(refused.Queued, rec)
		}
	}
	for _, i := range r.Sessions {
		if i >= 0 && i < len(b.Sessions) {
			rec := b.Sessions[i]
			move([]*int{&rec.FD})
			refused.Sessions = append(refused.Sessions, rec)
		}
	}
	for i, fd := range b.FDs {
		if !keep[i] {
			taken = append(taken, fd)
		}
	}
	return refused, taken
}

// FDsOf returns the descriptors the records r names, as Split would move
// them.
func (b *Batch) FDsOf(r Refused) []int {
	refused, _ := b.Split(r)
	return refused.FDs
}

// fds are pointers to the relay's descriptor fields.
func (r *Relay) fds() []*int {
	return []*int{&r.ClientFD, &r.BackendFD, &r.Streams[0].PipeR, &r.Streams[0].PipeW, &r.Streams[1].PipeR, &r.Streams[1].PipeW}
}
