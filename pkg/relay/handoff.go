package relay

// The listener hand-over of a binary upgrade: the server duplicates the
// listening sockets for the process taking over (EachListener), and once
// that process serves them takes them out of the loops' epoll sets
// (UnwatchListeners) before it drains.

// EachListener calls fn with each listening socket the relay still serves
// and its listener's name. On the loop (Do): the loop alone closes them,
// so no descriptor is read after being closed (or reused).
func (l *Loop) EachListener(fn func(fd int, name string)) {
	for _, s := range l.lsocks {
		if !s.closed {
			fn(s.fd, s.f.Name)
		}
	}
}

// UnwatchListeners takes the relay's listening sockets out of its loop's
// epoll set, on the loop, ahead of CloseListeners. Once another process
// holds the same sockets, closing this process's descriptors no longer
// removes them from the set (epoll forgets a file only when its last
// descriptor closes), and every new client would wake this loop for
// nothing while it drains.
func (l *Loop) UnwatchListeners() {
	l.r.Post(func() {
		for _, s := range l.lsocks {
			if !s.closed {
				l.r.Unwatch(s.fd)
				s.unwatched = true
			}
		}
	})
}
