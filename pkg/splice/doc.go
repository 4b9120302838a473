// Package splice holds the per-direction mechanics of the TCP relay
// (pkg/relay): how bytes move one way between two non-blocking sockets,
// and the pipes they move through. It blocks nowhere and starts no
// goroutine; the relay owns the sockets, their readiness, the timers and
// how a connection ends. Its syscalls are pkg/rawsys's.
//
// A Stream is one direction of a relayed connection. The loop calls its
// Move whenever the source may have become readable or the destination
// writable (edge-triggered readiness that the loop remembers, and Move
// clears on EAGAIN). Small reads are copied through the loop's scratch
// buffer and written out at once: moving a 64-byte request through a pipe
// costs more than reading and writing it (measured with the bench, copying
// small messages cut the added latency and the CPU per round trip by about
// a tenth). Once a single read reaches 16 KiB the stream counts as
// streaming and splices (splice(2)) from the source socket into a pipe and
// from the pipe into the destination socket, zero-copy; after a smaller
// read it copies again once it has given its pipe back. Bytes the
// destination would not take at once are kept, in the pipe or copied into
// a pooled buffer, and the stream reads nothing more until they are
// delivered. Move stops after about a budget of bytes, so one bulk stream
// cannot keep the loop from its other connections.
//
// Pipes come from a PipePool shared by the process, which caps the pipes
// in existence (part of the fd budget), through a PipeCache per loop that
// keeps the loop's share of the idle ones: taking and giving back a pipe,
// once per streaming burst, costs no lock and no atomic operation, and the
// shared pool is touched only to make or close one. A stream holds a pipe
// only while bytes are in it and gives it back as soon as the source would
// block with the pipe drained, so an idle connection holds
// its two sockets and nothing else (io.Copy keeps a pipe per direction for
// the connection's whole life). A pipe that still holds bytes when its
// connection is cut is closed, not reused. When no useful pipe can be had
// (the pool is at its cap, or the kernel grants only a pipe smaller than
// 64 KiB because an unprivileged user's quota, fs.pipe-user-pages-soft, is
// spent, after which the pool stops asking for a second) the stream copies
// that chunk instead.
//
// Bytes delivered are counted per stream (Stream.Delivered) and per path
// in the loop's Scratch (Spliced, Copied), which the loop flushes to
// shared counters once per wake-up rather than per chunk. Outcome names
// how a relayed connection ended, as the loop decides it.
package splice
