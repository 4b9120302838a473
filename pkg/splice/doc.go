// Package splice relays bytes between two connections, zero-copy when both
// ends are TCP sockets.
//
// Each direction streams data with splice(2) through a pipe taken from a
// PipePool and waits for readiness on the Go netpoller through
// syscall.RawConn, so no OS thread is parked per connection. A direction
// holds a pipe only while it has data in flight: the pipe is taken when the
// source is readable and handed back as soon as it is drained and the source
// would block. An idle connection therefore holds its two sockets and nothing
// else, unlike io.Copy, which keeps one pipe per direction for the
// connection's whole life.
//
// Small messages are copied, not spliced: a direction copies through a
// pooled buffer until a read reaches 16 KiB, splices while reads stay that
// large, and copies again after a small one. Moving a 64-byte request
// through a pipe costs more than reading and writing it; measured with the
// bench, copying small messages cut the added latency per round trip and
// its CPU by about a tenth, while streams keep zero-copy.
//
// When no pipe can be had (the pool is at its cap, or the kernel gives only a
// tiny pipe because an unprivileged user's pipe quota is spent) a direction
// degrades to a user-space copy through a pooled buffer for that chunk rather
// than splicing through a slow pipe. Connections that are not both TCP are
// relayed by user-space copy throughout.
//
// Half-close is exact: EOF on one side shuts the write half of the other and
// the opposite direction keeps flowing. A reset on one side is passed on as a
// reset to the other. An idle timeout, reset by traffic in either direction,
// closes a silent connection; it costs one timer per connection that is only
// re-armed when it fires, not on every read.
package splice
