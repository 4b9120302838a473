package testnet

import (
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// Ports come from below the ephemeral range, never twice in a process,
// and each can be bound for TCP and UDP.
func TestFreePortIsUniqueBindableAndOutsideTheEphemeralRange(t *testing.T) {
	seen := map[int]bool{}
	for range 200 {
		p := FreePort(t)
		if p < firstTestPort || p > lastTestPort {
			t.Fatalf("port %d outside %d-%d", p, firstTestPort, lastTestPort)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
	}
	p := FreePort(t)
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
	if err != nil {
		t.Fatalf("tcp on a free port: %v", err)
	}
	defer l.Close()
	u, err := net.ListenPacket("udp", "127.0.0.1:"+strconv.Itoa(p))
	if err != nil {
		t.Fatalf("udp on a free port: %v", err)
	}
	u.Close()
}

// A port another process reserved cannot be reserved here while that
// process lives, even with nothing bound to it (what go test's parallel
// packages need), and can once it has exited.
func TestFreePortSkipsWhatAnotherProcessReserved(t *testing.T) {
	if os.Getenv("L4LB_TEST_RESERVE_CHILD") != "" {
		// The child: reserve ports and print them, then hold them until
		// the parent closes standard input.
		var ports []string
		for range 50 {
			ports = append(ports, strconv.Itoa(FreePort(t)))
		}
		os.Stdout.WriteString(strings.Join(ports, " ") + "\n")
		os.Stdin.Read(make([]byte, 1))
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestFreePortSkipsWhatAnotherProcessReserved$")
	cmd.Env = append(os.Environ(), "L4LB_TEST_RESERVE_CHILD=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		if cmd.ProcessState == nil {
			cmd.Wait()
		}
	}()
	line := make([]byte, 4096)
	n, err := stdout.Read(line)
	if err != nil {
		t.Fatal(err)
	}
	theirs := map[int]bool{}
	for _, f := range strings.Fields(string(line[:n])) {
		p, _ := strconv.Atoi(f)
		theirs[p] = true
	}
	if len(theirs) != 50 {
		t.Fatalf("child reserved %d ports, want 50: %q", len(theirs), line[:n])
	}
	dir := portLockDir()
	for p := range theirs {
		f, err := lockPort(dir, p)
		if err != nil {
			t.Fatal(err)
		}
		if f != nil {
			f.Close()
			t.Fatalf("port %d can be reserved here while another process holds it", p)
		}
	}
	// Once the child is gone (here it exits; a crash lets go the same
	// way), its ports can be reserved again.
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	for p := range theirs {
		f, err := lockPort(dir, p)
		if err != nil || f == nil {
			t.Fatalf("port %d still held after its process exited: %v", p, err)
		}
		f.Close()
	}
}
