// Package listener opens TCP listening sockets and runs their accept loops.
//
// One configured address becomes several sockets bound with SO_REUSEPORT,
// each with its own accept loop, so the kernel spreads new connections over
// them and no single accept queue or goroutine is a bottleneck. The backlog
// is set with listen(2) itself. An accept error such as running out of file
// descriptors (EMFILE, ENFILE) or kernel memory is not fatal: the loop backs
// off, doubling from 5 ms to 1 s, and resumes when accepting works again, so
// it neither spins a CPU nor stops listening.
package listener
