package handoff

import (
	"testing"

	"golang.org/x/sys/unix"
)

// A flows message's control data cut short after a whole SCM_RIGHTS
// message still names that message's descriptors: they are this
// process's, and a parse that gave up on them would leave them open.
func TestParseRightsReturnsDescriptorsBesideAnError(t *testing.T) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(p[0]); unix.Close(p[1]) })
	whole := unix.UnixRights(p[0], p[1])
	cut := append(append([]byte(nil), whole...), unix.UnixRights(p[0])[:unix.CmsgSpace(0)-2]...)

	fds, err := parseRights(whole)
	if err != nil || len(fds) != 2 || fds[0] != p[0] || fds[1] != p[1] {
		t.Fatalf("whole control data: %v, %v; want [%d %d]", fds, err, p[0], p[1])
	}
	fds, err = parseRights(cut)
	if err == nil {
		t.Fatal("control data cut short parsed without an error")
	}
	if len(fds) != 2 || fds[0] != p[0] || fds[1] != p[1] {
		t.Fatalf("control data cut short: descriptors %v; want the whole message's [%d %d], for the caller to close", fds, p[0], p[1])
	}
	if fds, err := parseRights(nil); err != nil || len(fds) != 0 {
		t.Fatalf("no control data: %v, %v", fds, err)
	}
}
