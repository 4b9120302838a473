// Package flow is an established connection in transit from one l4lb
// process to the next in a binary upgrade: a TCP relay (Relay) or a UDP
// session (Session) as the old process's event loop detaches it, and as
// the new process's loop adopts it. Its job is the record: what a loop
// must know to carry the connection on as if nothing happened. Moving
// records and their descriptors between the processes is pkg/handoff's;
// taking a connection apart and putting it together is pkg/relay's and
// pkg/udpsession's.
//
// A record names its descriptors by index into the descriptors that travel
// with it (FD fields; NoFD: none), so a batch of records and its fds go in
// one message. Times travel as durations measured by the old process
// (nanoseconds, suffix _ns), never as timestamps: no two clocks are
// compared. The records are JSON and part of the upgrade contract (two
// builds speak them): extend them, never rename or reorder.
package flow

// NoFD is an FD field that names no descriptor.
const NoFD = -1

// Relay is one established TCP relay: the client's socket, the backend's,
// and what the relay knows of them.
type Relay struct {
	// Listener is the name of the listener that accepted the client; Pool
	// the pool its backend belongs to, Backend that backend's identity
	// and BackendAddr its address (the adopting process must have a
	// backend of that identity at that address in that pool).
	Listener    string `json:"listener"`
	Pool        string `json:"pool"`
	Backend     string `json:"backend"`
	BackendAddr string `json:"backend_addr"`
	// Client is the client's address and port (from its PROXY header,
	// when the listener takes them); Dst what the client connected to,
	// from that header ("": ask the socket).
	Client string `json:"client"`
	Dst    string `json:"dst,omitempty"`
	// Sourced: the client counts against the listener's per-source limit.
	Sourced bool `json:"sourced,omitempty"`
	// ProxySent: the pool's PROXY header went to the backend before the
	// first client byte (never sent again).
	ProxySent bool `json:"proxy_sent,omitempty"`

	ClientFD  int `json:"client_fd"`
	BackendFD int `json:"backend_fd"`
	// ClientEnd and BackendEnd are what the loop had learnt of each socket.
	ClientEnd  End `json:"client_end"`
	BackendEnd End `json:"backend_end"`
	// Streams are the two directions: 0 client to backend, 1 backend to
	// client.
	Streams [2]Stream `json:"streams"`

	// Age is the time since the client was accepted (the access log's
	// duration goes on from it); Idle the time since bytes last moved (the
	// idle timeout goes on from it).
	Age  int64 `json:"age_ns"`
	Idle int64 `json:"idle_ns"`
	// SendQueues are the sockets' unacknowledged bytes at the last idle
	// check (a peer still reading out counts as traffic).
	SendQueues [2]int `json:"send_queues"`

	// Verdict is the dial's breaker result still open (count_early_reset):
	// nil when it was settled at connect or since.
	Verdict *Verdict `json:"verdict,omitempty"`

	// ServerName and Route are a routed listener's client's, as in
	// Queued: for its access line in the new process.
	ServerName string `json:"server_name,omitempty"`
	Route      string `json:"route,omitempty"`
}

// End is what a loop had learnt of one socket from its events.
type End struct {
	// PeerDone: the peer's FIN, a reset or an error was reported.
	PeerDone bool `json:"peer_done,omitempty"`
	// HangUp: an error or hang-up was reported.
	HangUp bool `json:"hang_up,omitempty"`
	// Urgent: the peer sent TCP urgent data.
	Urgent bool `json:"urgent,omitempty"`
}

// Stream is one direction of a relay.
type Stream struct {
	// Delivered counts the bytes written to the destination so far.
	Delivered int64 `json:"delivered"`
	// Ended: the direction is over (its FIN passed on, the destination's
	// write side shut).
	Ended bool `json:"ended,omitempty"`
	// EOF: the source's end was read; what is held is the last of it.
	EOF bool `json:"eof,omitempty"`
	// Streaming: the last read was large (the stream splices).
	Streaming bool `json:"streaming,omitempty"`
	// Urgent: the source has TCP urgent data; the stream copies.
	Urgent bool `json:"urgent,omitempty"`
	// Held are bytes read from the source by copy that the destination
	// has not taken yet. A stream keeps bytes in flight in one place at a
	// time: Held or the pipe, never both.
	Held []byte `json:"held,omitempty"`
	// PipeR and PipeW are the pipe holding InPipe bytes read from the
	// source and not yet delivered (NoFD: none).
	PipeR  int `json:"pipe_r"`
	PipeW  int `json:"pipe_w"`
	InPipe int `json:"in_pipe,omitempty"`
}

// Verdict is a dial whose breaker result is still open: the breaker
// generation it captured before connect(2), so a result that comes after
// the hand-over is judged as the old process would have judged it (a
// success captured before a trip never closes the breaker).
type Verdict struct {
	Force      bool   `json:"force,omitempty"`
	Generation uint64 `json:"generation"`
	// Left is the time the verdict may still take (early_reset_window, a
	// UDP session's reply_timeout) before it settles by itself.
	Left int64 `json:"left_ns"`
}

// Session is one UDP session: the socket connected to its backend, and
// the client it relays for.
type Session struct {
	Listener    string `json:"listener"`
	Pool        string `json:"pool"`
	Backend     string `json:"backend"`
	BackendAddr string `json:"backend_addr"`
	// Socket is the identity (listener.SocketID) of the listener socket
	// the client's datagrams arrive on: the loop serving that socket in
	// the new process takes the session, so its client's next datagram
	// finds it.
	Socket uint64 `json:"socket"`
	Client string `json:"client"`
	// Name is the client's socket address as the kernel wrote it, and
	// Control the control message its replies leave with (the address the
	// client sent to, on a wildcard listener).
	Name    []byte `json:"name"`
	Control []byte `json:"control,omitempty"`
	// ProxyHeader starts every datagram to the backend (proxy_protocol).
	ProxyHeader []byte `json:"proxy_header,omitempty"`
	FD          int    `json:"fd"`

	Forced bool `json:"forced,omitempty"`
	// Requests and Responses count the datagrams each way so far (the
	// listener's requests and responses limits go on from them).
	Requests  int `json:"requests"`
	Responses int `json:"responses"`
	// Retired: the session took its requests and is no longer found by
	// its client's address; Excess: the backend sent more than its
	// responses.
	Retired bool  `json:"retired,omitempty"`
	Excess  bool  `json:"excess,omitempty"`
	Idle    int64 `json:"idle_ns"`

	// Verdict is the first datagram's breaker result still open (no reply
	// yet); Left is what is left of reply_timeout.
	Verdict *Verdict `json:"verdict,omitempty"`
	// Drops is the backend socket's count of datagrams the kernel dropped
	// (SO_RXQ_OVFL), as the old process last saw it: the drops after it
	// are the new process's to count.
	Drops uint32 `json:"drops_seen,omitempty"`
	// Age is how long the session has been open, and BytesToBackend and
	// BytesToClient what it relayed each way, for the access record the
	// new process writes when it ends; 0 from a process that sent none.
	Age            int64 `json:"age_ns,omitempty"`
	BytesToBackend int64 `json:"bytes_to_backend,omitempty"`
	BytesToClient  int64 `json:"bytes_to_client,omitempty"`
}

// Queued is a client waiting for a backend slot (queue_timeout): it has
// no backend yet, and the new process queues it as the old one would
// have, its wait going on from Waited.
type Queued struct {
	Listener  string `json:"listener"`
	Pool      string `json:"pool"`
	Client    string `json:"client"`
	Dst       string `json:"dst,omitempty"`
	Sourced   bool   `json:"sourced,omitempty"`
	ClientFD  int    `json:"client_fd"`
	ClientEnd End    `json:"client_end"`
	Age       int64  `json:"age_ns"`
	Waited    int64  `json:"waited_ns"`

	// What the client had spent of connect_budget when it left for the
	// queue (the budget stands still while it waits): BudgetLeft of it,
	// Budgeted if it ran at all (a connect(2) was made), Forced if the
	// client made its one force-try. All zero, from a build that sends
	// none, a fresh budget.
	BudgetLeft int64 `json:"budget_left_ns,omitempty"`
	Budgeted   bool  `json:"budgeted,omitempty"`
	Forced     bool  `json:"forced,omitempty"`
	// ServerName and Route are a routed listener's client's: the name its
	// ClientHello asked for (hash_key = "sni", the PROXY header's
	// authority, its access line) and the route that matched, by name
	// ("": the listener's pool). Its route counted it in the old process.
	// Relay carries them too.
	ServerName string `json:"server_name,omitempty"`
	Route      string `json:"route,omitempty"`
}

// Batch is records and the descriptors they name, as they travel in one
// message.
type Batch struct {
	Relays   []Relay   `json:"relays,omitempty"`
	Queued   []Queued  `json:"queued,omitempty"`
	Sessions []Session `json:"sessions,omitempty"`
	// FDs are the descriptors, in the order the records' FD fields index
	// them; they travel beside the JSON (SCM_RIGHTS), never in it.
	FDs []int `json:"-"`
	// HeldBytes counts the Held bytes of the batch's streams.
	HeldBytes int `json:"-"`
}

// A batch's bounds, so that one travels as one message of a unix socket
// whatever the records: the kernel passes at most 253 descriptors per
// message (SCM_MAX_FD), and a batch's bytes are bounded so that most
// fit an unprivileged sender's socket buffer (twice net.core.wmem_max,
// 416 KiB by default); the sender splits one that does not (pkg/handoff).
const (
	MaxRecords   = 128
	MaxFDs       = 250
	MaxRecordFDs = 6 // a relay: two sockets, a pipe (two ends) per direction
	// maxHeld: a batch holding more takes no more records. A relay holds
	// at most a copy buffer (64 KiB) per direction, so a batch holds less
	// than 192 KiB, 256 KiB in base64, beside its records' JSON.
	maxHeld = 64 << 10
)

// Room reports whether b can take one more record of any kind.
func (b *Batch) Room() bool {
	return b.Len() < MaxRecords && len(b.FDs)+MaxRecordFDs <= MaxFDs && b.HeldBytes < maxHeld
}

// AddFD appends fd to the batch and returns the index a record names it
// by; NoFD stays NoFD.
func (b *Batch) AddFD(fd int) int {
	if fd < 0 {
		return NoFD
	}
	b.FDs = append(b.FDs, fd)
	return len(b.FDs) - 1
}

// FD returns the descriptor a record's field names, NoFD for NoFD, and
// false for an index the batch has no descriptor at.
func (b *Batch) FD(i int) (int, bool) {
	if i == NoFD {
		return NoFD, true
	}
	if i < 0 || i >= len(b.FDs) {
		return NoFD, false
	}
	return b.FDs[i], true
}

// Len is the number of records in the batch.
func (b *Batch) Len() int { return len(b.Relays) + len(b.Queued) + len(b.Sessions) }
