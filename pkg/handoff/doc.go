// Package handoff is what one l4lb process passes to another, or to its
// own next start: the binary upgrade (the old process's side, Upgrader;
// the new process's side, Inheritance, which also takes systemd's socket
// activation), the state document, breaker feed and hand-over of
// established connections of an upgrade, the pid file, and the state file that keeps operators' changes across restarts. Its job is the
// protocol between two builds of l4lb; what each process serves is the
// caller's.
//
// The two processes of an upgrade are two builds, so everything below is
// a contract: an old binary must upgrade to a new one and back. Extend it,
// never rename or reorder.
//
// # Upgrade: the sequence
//
// On SIGUSR2 (or l4lb upgrade, which sends it) the old process:
//
//  1. refuses reloads and operators' actions (the new process starts from
//     the state taken next, so a change made after it would be undone);
//  2. with its own breaker store (not a fleet's), opens the breaker feed
//     pipe and subscribes to the store's changes;
//  3. takes the state document (after 2, so no change falls between the
//     two);
//  4. starts the executable at the path it was started from (a symlink
//     stays one), with its own arguments and the environment and fds
//     below;
//  5. writes the state document to the state pipe and closes it;
//  6. waits, for the upgrade timeout (run -upgrade-timeout, default 1m),
//     for "READY <pid>\n" on the readiness pipe, pid being the new
//     process's. Once it comes (and the new process has not exited), the
//     old process tells systemd MAINPID=<new pid>, stops accepting, closes
//     its admin endpoint, hands its established connections over on the
//     flows socket (below), drains what stays with it and exits, writing
//     the feed until then.
//     If the new process exits first, closes the pipe, says anything else
//     or the time runs out, it is killed (SIGKILL) and reaped, the old
//     process serves on, allows reloads and actions again, and rewrites
//     the pid file with its own pid (l4lb upgrade reads that as a failed
//     attempt). A SIGTERM or SIGINT during the wait kills the new process
//     and is then acted on; another SIGUSR2 is ignored.
//
// The new process reads the state document whole before it builds
// anything, serves the inherited sockets instead of binding, refuses
// actions and reloads on the shared admin socket until it has written
// READY (after its hello on the flows socket), takes the pid file,
// adopts the connections the old process passes, and follows the breaker
// feed until the old process closes it (it exited).
//
// # Environment
//
// The old process sets, and the new one reads and unsets at start (so
// nothing it starts in turn takes them):
//
//	L4LB_UPGRADE_PARENT        the old process's pid, decimal. The new
//	                           process takes nothing unless it is its
//	                           parent's pid (a grandchild never does).
//	L4LB_UPGRADE_STATE         "3": fd of the state pipe (read end).
//	L4LB_UPGRADE_READY         "4": fd of the readiness pipe (write end).
//	L4LB_UPGRADE_SOCKETS       "FIRST:COUNT", "5:N": the listening sockets
//	                           on fds FIRST to FIRST+COUNT-1, the
//	                           listeners' then the admin endpoint's.
//	L4LB_UPGRADE_BREAKER_FEED  "FD:PID": fd of the breaker feed's read
//	                           end (5+N, after the sockets, so their
//	                           numbering is what builds without the feed
//	                           expect) and the old process's pid. Absent
//	                           with a fleet's store (its state is in
//	                           Redis). A build without the feed leaves the
//	                           variable set; the pid keeps the processes it
//	                           starts from taking the fd.
//	L4LB_UPGRADE_FLOWS         "FD:PID": fd of the new process's end of
//	                           the flows socket (the last fd passed, so
//	                           every other keeps the number older builds
//	                           expect) and the old process's pid, as the
//	                           feed's.
//
// An fd below 3 is never taken. The old process passes nothing else of
// these names, nor LISTEN_PID, LISTEN_FDS, LISTEN_FDNAMES or WATCHDOG_PID
// (those name it; the new process pings systemd once it is the main
// process); the rest of its environment is passed as it is.
//
// With no L4LB_UPGRADE_PARENT, a process whose LISTEN_PID is its own
// takes LISTEN_FDS sockets from fd 3 (systemd's socket activation).
// Inherited fds are made close-on-exec; one that is not a socket l4lb can
// serve is closed with a warning; a socket no listener of the new
// configuration is bound to is closed once the new process serves.
//
// # Pipes
//
//	state pipe      old -> new, once: the state document (below), one
//	                JSON object and a newline, then EOF. The new process
//	                reads at most 64 MiB.
//	readiness pipe  new -> old, once: "READY <pid>\n" in ASCII. EOF
//	                without it means the new process is exiting.
//	breaker feed    old -> new, from the upgrade's start until the old
//	                process exits: a header line, then one line per change
//	                of its breaker store (below). The old process's end is
//	                non-blocking; a new process that does not read costs
//	                it a write given up at exit (2 s grace for what is
//	                pending).
//	flows socket    both ways, a unix SOCK_SEQPACKET pair: one JSON object
//	                per message, a batch's descriptors with it
//	                (SCM_RIGHTS). Below.
//
// # Documents and their versions
//
// The state document is JSON: {"format":"l4lb-upgrade-state","version":4,
// "from_pid":…,"from_version":…,"breaker":[…],"health":[…],"runtime":[…],
// "members":{…}} (State). Version 1 had no "runtime" (drains and weights),
// version 2 no "members" (the API's and DNS's backends), version 3 no
// drain times in "runtime" (a drain's deadline). A document is written as
// the oldest version that holds what it carries (State.lowestVersion), so
// the build before reads it unless it needs the newer keys. A reader takes
// its own version and the older ones; a newer version, another format or
// an unknown key is refused with an error naming it, and the new process
// then starts fresh (breakers, disables, health, drains and weights), with
// a warning, rather than refusing to serve. Breaker cooldowns travel as
// time remaining ("29.5s"), never as timestamps: no two clocks are
// compared.
//
// The breaker feed's first line is {"format":"l4lb-breaker-feed",
// "version":1}; each next line is one key's state after a change, as the
// state document's breaker entries are written. A follower that does not
// know the header follows nothing and logs why; the old process's
// document still applies.
//
// # Hand-over of established connections: the flows socket
//
// The new process writes its hello, {"format":"l4lb-flows","version":1,
// "pid":…,"counts":true}, before READY, so the old process finds it there the moment
// READY comes; a READY with no hello before it (a build without the
// hand-over, which leaves the fd unread) or a hello of another format or
// version leaves every connection with the old process, which drains
// them for [global] upgrade_drain_timeout (0: until they close). With a
// hello of its own version, the old process sends batches, each
// {"type":"batch","seq":N,"fds":K,"relays":[…],"queued":[…],
// "sessions":[…]} with its K descriptors: pkg/flow's records (Relay,
// Queued, Session), whose FD fields index the descriptors, at most
// flow.MaxRecords records and flow.MaxFDs descriptors a batch (split
// further when its message would not fit the socket), up to four batches
// unacknowledged at once. Each is acknowledged in order,
// {"type":"ack","seq":N,"refused":{"relays":[i…],"queued":[…],
// "sessions":[…]}}; the old process keeps its own descriptors of a batch
// until then, closes them after the ack, and adopts back the refused
// records (the new process closed its copies of those). The new process
// registers a batch held still, acknowledges it, then lets it run. When
// anything fails, the old process stops sending and reads acks until the
// new process's end closes (a close with messages unread is reported
// once, ahead of them: it reads past it), and adopts back only the
// batches never acknowledged; so no connection is run by both. A batch
// the new process acknowledged dies with it if it dies; a batch in flight
// when a second stop signal makes the old process exit lives on in the
// new one if it takes it. Clients still being set up
// in the old process go in later batches, once established; when it holds
// nothing more to pass it writes {"type":"done","relays_total":R,
// "queued_total":Q,"sessions_total":S} and closes its end, or, to a new
// process whose hello said "counts" (absent: false), keeps it until it
// exits. To such a process only, the old one also reports how many client
// connections it holds, {"type":"open","open":C}: before its first batch,
// after each acknowledgement, before "done" and then every 500 ms; the new
// process counts C, less the relays and queued clients it adopted since,
// against [global] max_connections, and forgets it 2 s after the last
// report or when the socket closes. An older new process never gets one
// (it would read it as a protocol error); one that gets none counts
// nothing for the old process. A batch whose
// descriptors did not all arrive (MSG_CTRUNC: the new process is out of
// fds) is refused whole. Times in the records are durations measured by
// the old process, never timestamps.
//
// The pid file (run -pidfile) holds the serving process's pid in decimal
// and a newline, always replaced by a rename: written once a process
// serves, rewritten with the same pid after a failed attempt, removed at
// exit only while it names the exiting process. l4lb upgrade -pidfile
// (Request) waits for it to be replaced: another live pid is a hand-over,
// the same pid a failed attempt. The state file
// ([global] state_file) is {"format":"l4lb-state","version":1,
// "disabled":[…],"backends":{pool:{identity:{…}}},"added":{pool:[…]}}
// ("added", the API's backends, left out when there are none, so older
// builds read the file as before), rewritten whole after
// every operator's change; a process refuses to start on one it cannot
// read rather than guess. A starting process takes the state file's
// disables (with its own breaker store; a fleet keeps them in Redis) and
// its drains and weights, unless an upgrade's state document brought the
// old process's live ones, which are fresher (Inheritance.TakeUp).
package handoff
