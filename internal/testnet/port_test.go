package testnet

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// Ports come from the test range outside the ephemeral one, never twice
// while a test holds them, and each can be bound for TCP and UDP; the
// test's end gives them back.
func TestFreePortIsUniqueBindableAndOutsideTheEphemeralRange(t *testing.T) {
	lo, hi := ephemeralPorts()
	seen := map[int]bool{}
	t.Run("hold", func(t *testing.T) {
		for range 200 {
			p := FreePort(t)
			if p < firstTestPort || p > lastTestPort || (lo <= p && p <= hi) {
				t.Fatalf("port %d outside %d-%d or inside the ephemeral %d-%d", p, firstTestPort, lastTestPort, lo, hi)
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
	})
	reserveMu.Lock()
	held := len(reserved)
	reserveMu.Unlock()
	if held != 0 {
		t.Fatalf("%d ports still reserved after the test that took them ended", held)
	}
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
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("the child's ports: %q, %v", line, err)
	}
	theirs := map[int]bool{}
	for _, f := range strings.Fields(line) {
		p, _ := strconv.Atoi(f)
		theirs[p] = true
	}
	if len(theirs) != 50 {
		t.Fatalf("child reserved %d ports, want 50: %q", len(theirs), line)
	}
	dir, err := portLockDir()
	if err != nil {
		t.Fatal(err)
	}
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
	// way), its ports can be reserved again: all but any that another
	// test process took in between, which at random starting points in
	// thousands of ports is at most a few.
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	free := 0
	for p := range theirs {
		f, err := lockPort(dir, p)
		if err != nil {
			t.Fatal(err)
		}
		if f != nil {
			free++
			f.Close()
		}
	}
	if free < 40 {
		t.Fatalf("%d of 50 ports free again after their process exited, want nearly all", free)
	}
}
