package admin

import (
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/l4lb/l4lb/pkg/config"
)

func haveIPv6(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback here: %v", err)
	}
	ln.Close()
}

// The endpoint binds exactly the family its address names: Go's "tcp" on
// 0.0.0.0 or [::] is dual-stack and would also take the other family.
func TestBindsOnlyTheFamilyAsked(t *testing.T) {
	haveIPv6(t)
	tests := []struct {
		listen    string
		reach     string // loopback of the family asked: must connect
		unreached string // loopback of the other family: must be refused
	}{
		{"0.0.0.0:0", "127.0.0.1", "::1"},
		{"[::]:0", "::1", "127.0.0.1"},
		{"127.0.0.1:0", "127.0.0.1", "::1"},
		{"[::1]:0", "::1", "127.0.0.1"},
		{"[::ffff:127.0.0.1]:0", "127.0.0.1", "::1"}, // the IPv4 address it maps
	}
	for _, tc := range tests {
		t.Run(tc.listen, func(t *testing.T) {
			s, _, _ := startAdmin(t, config.Admin{Listen: tc.listen}, testTimeouts)
			port := strconv.Itoa(s.Addr().(*net.TCPAddr).Port)
			c, err := net.DialTimeout("tcp", net.JoinHostPort(tc.reach, port), 10*time.Second)
			if err != nil {
				t.Fatalf("%s does not reach the endpoint on %s: %v", tc.reach, tc.listen, err)
			}
			c.Close()
			c, err = net.DialTimeout("tcp", net.JoinHostPort(tc.unreached, port), 10*time.Second)
			if err == nil {
				c.Close()
				t.Fatalf("%s reaches the endpoint on %s: it listens on both families", tc.unreached, tc.listen)
			}
		})
	}
}

func TestBindAddr(t *testing.T) {
	for in, want := range map[string]string{
		"0.0.0.0:9090":          "tcp4 0.0.0.0:9090",
		"127.0.0.1:9090":        "tcp4 127.0.0.1:9090",
		"[::ffff:10.0.0.1]:80":  "tcp4 10.0.0.1:80",
		"[::]:9090":             "tcp6 [::]:9090",
		"[::1]:9090":            "tcp6 [::1]:9090",
		"[fe80::1%lo]:9090":     "tcp6 [fe80::1%lo]:9090",
		"localhost:9090":        "tcp localhost:9090", // pkg/config refuses names
		"not an address at all": "tcp not an address at all",
	} {
		if n, a := bindAddr(in); n+" "+a != want {
			t.Errorf("bindAddr(%q) = %s %s, want %s", in, n, a, want)
		}
	}
}

// One warning at start when the endpoint is reachable from other hosts,
// saying why it matters and whether POST routes are open.
func TestWarnsWhenNotOnLoopback(t *testing.T) {
	haveIPv6(t)
	tokenFile := writeFile(t, "s3cret\n")
	tests := []struct {
		listen, tokenFile string
		want              []string // each must be in the one WARN line; nil: no WARN
		notWant           string
	}{
		{"127.0.0.1:0", "", nil, ""},
		{"[::1]:0", "", nil, ""},
		{"0.0.0.0:0", "", []string{"not on loopback", "disable backends", "unauthenticated", "token_file"}, ""},
		{"[::]:0", "", []string{"not on loopback", "disable backends", "unauthenticated"}, ""},
		{"0.0.0.0:0", tokenFile, []string{"not on loopback", "require the token"}, "unauthenticated"},
	}
	for _, tc := range tests {
		t.Run(tc.listen+" token="+strconv.FormatBool(tc.tokenFile != ""), func(t *testing.T) {
			_, _, log := startAdmin(t, config.Admin{Listen: tc.listen, TokenFile: tc.tokenFile}, testTimeouts)
			warns := log.lines("level=WARN")
			if tc.want == nil {
				if len(warns) != 0 {
					t.Fatalf("warned on loopback: %q", warns)
				}
				return
			}
			if len(warns) != 1 {
				t.Fatalf("%d WARN lines, want one:\n%s", len(warns), log)
			}
			for _, w := range tc.want {
				if !strings.Contains(warns[0], w) {
					t.Errorf("warning lacks %q: %s", w, warns[0])
				}
			}
			if tc.notWant != "" && strings.Contains(warns[0], tc.notWant) {
				t.Errorf("warning says %q: %s", tc.notWant, warns[0])
			}
		})
	}
}
