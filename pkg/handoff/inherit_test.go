package handoff

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/listener"
)

// A new process given a state document it cannot read still serves: its
// sockets are taken over, breaker state and health start fresh, and the
// log says so.
func TestUpgradeInheritanceFallsBackToAFreshStart(t *testing.T) {
	testnet.CheckLeaks(t)
	socks, err := listener.Bind("l", "127.0.0.1:0", 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer socks.Close()
	// The sockets on two consecutive fds, as an upgrade passes them.
	first := -1
	for base := 100; first < 0; base += 10 {
		a, err := unix.FcntlInt(uintptr(socks.FDs[0]), unix.F_DUPFD_CLOEXEC, base)
		if err != nil {
			t.Fatal(err)
		}
		b, err := unix.FcntlInt(uintptr(socks.FDs[1]), unix.F_DUPFD_CLOEXEC, a+1)
		if err != nil {
			t.Fatal(err)
		}
		if b == a+1 {
			first = a
			continue
		}
		unix.Close(a)
		unix.Close(b)
	}
	var pipe [2]int
	if err := unix.Pipe2(pipe[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	unix.Write(pipe[1], []byte(`{"format":"l4lb-upgrade-state","version":7}`))
	unix.Close(pipe[1])
	t.Setenv(EnvParent, strconv.Itoa(os.Getppid()))
	t.Setenv(EnvState, strconv.Itoa(pipe[0]))
	t.Setenv(EnvSockets, fmt.Sprintf("%d:2", first))
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	inh := Take(log)
	if inh.From != "upgrade" || inh.State != nil {
		t.Fatalf("from %q, state %v; want an upgrade with no state", inh.From, inh.State)
	}
	for _, want := range []string{"start fresh", "version 7, and this l4lb reads versions 1 to 4"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
	if _, err := unix.FcntlInt(uintptr(pipe[0]), unix.F_GETFD, 0); err != unix.EBADF {
		t.Errorf("the state pipe is still open (%v)", err)
	}
	got := inh.Sockets.Take("tcp", socks.Addr.String())
	for _, fd := range got {
		unix.Close(fd)
	}
	if len(got) != 2 || got[0] != first || got[1] != first+1 {
		t.Fatalf("sockets taken: %v, want fds %d and %d", got, first, first+1)
	}
	for _, k := range []string{EnvParent, EnvState, EnvSockets} {
		if v, ok := os.LookupEnv(k); ok {
			t.Errorf("%s=%s left for processes this one starts", k, v)
		}
	}
	// Not this process's parent: nothing is taken.
	t.Setenv(EnvParent, "1")
	t.Setenv(EnvSockets, fmt.Sprintf("%d:2", socks.FDs[0])) // never touched
	logs.Reset()
	if inh := Take(log); inh.From != "" || inh.Sockets != nil {
		t.Fatalf("took %+v from variables meant for another process", inh)
	}
	if !strings.Contains(logs.String(), "meant for another process") {
		t.Errorf("log: %s", logs.String())
	}
}

// refusals records what a Refuser was asked, and what is still refused.
type refusals struct{ refused map[string]string }

func (r *refusals) RefuseReloads(why string) func() { return r.refuse("reloads", why) }
func (r *refusals) RefuseActions(why string) func() { return r.refuse("actions", why) }

func (r *refusals) refuse(what, why string) func() {
	r.refused[what] = why
	return func() { delete(r.refused, what) }
}

// An upgrade's new process refuses reloads and actions, naming the old
// process, until it serves; a process that inherited nothing, or
// systemd's sockets, refuses nothing.
func TestNewProcessRefusesUntilItServes(t *testing.T) {
	r := &refusals{refused: map[string]string{}}
	inh := None()
	inh.From, inh.Parent = "upgrade", 4242
	serving := inh.RefuseUntilServing(r)
	for _, what := range []string{"reloads", "actions"} {
		if !strings.Contains(r.refused[what], "taking over from pid 4242") {
			t.Errorf("%s refused as %q, want it to name the old process", what, r.refused[what])
		}
	}
	serving()
	if len(r.refused) != 0 {
		t.Fatalf("still refused once serving: %v", r.refused)
	}
	for _, from := range []string{"", "systemd"} {
		inh := None()
		inh.From = from
		inh.RefuseUntilServing(r)()
		if len(r.refused) != 0 {
			t.Fatalf("inherited from %q, refused %v", from, r.refused)
		}
	}
}
