package config

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
)

// testHost has the interfaces of a typical server: loopback, one IPv4
// network, one IPv6 network and a link-local address.
var testHost = Host{Addrs: []netip.Prefix{
	netip.MustParsePrefix("127.0.0.1/8"),
	netip.MustParsePrefix("192.0.2.2/24"),
	netip.MustParsePrefix("::1/128"),
	netip.MustParsePrefix("fd00::2/64"),
	netip.MustParsePrefix("fe80::fc:ff:fe00:1/64"),
	netip.MustParsePrefix("198.51.100.7/31"),
}}

// hostErrors parses src (which must parse) and returns what CheckHost
// finds on testHost.
func hostErrors(t *testing.T, src string) Errors {
	t.Helper()
	err := mustParse(t, src).CheckHost(testHost)
	if err == nil {
		return nil
	}
	var errs Errors
	if !errors.As(err, &errs) || !errors.Is(err, ErrInvalid) {
		t.Fatalf("CheckHost error %T is not an invalid-configuration Errors: %v", err, err)
	}
	return errs
}

func TestCheckHostRefusesWhatThisHostCannotServe(t *testing.T) {
	const loop = "l4lb would connect to itself, in a loop, for every client"
	tests := []problem{
		{"interface address under an IPv4 wildcard", listeners([]string{`"0.0.0.0:8080"`}, `"192.0.2.2:8080" #!`), "pool.web.backend[0].addr",
			`backend "192.0.2.2:8080" is an address of this host, where listener[0] "l0" (bind "0.0.0.0:8080", line 1) accepts too: ` + loop},
		{"interface address under an IPv6 wildcard", listeners([]string{`"[::]:8080"`}, `"[fd00::2]:8080" #!`), "pool.web.backend[0].addr",
			"is an address of this host"},
		{"link-local interface address with a zone", listeners([]string{`"[::]:8080"`}, `"[fe80::fc:ff:fe00:1%eth0]:8080" #!`), "pool.web.backend[0].addr",
			"is an address of this host"},
		{"interface address under the admin wildcard", validBase + "[admin]\nlisten = \"0.0.0.0:9090\"\n[pool.x]\n[[pool.x.backend]]\naddr = \"192.0.2.2:9090\" #!\n", "pool.x.backend[0].addr",
			"is l4lb's own admin endpoint"},
		{"backend at a network's broadcast address", listeners([]string{`"127.0.0.1:8080"`}, `"192.0.2.255:80" #!`), "pool.web.backend[0].addr",
			`"192.0.2.255:80": 192.0.2.255 is the broadcast address of local network 192.0.2.0/24, which TCP cannot use`},
		{"bind at a network's broadcast address", listeners([]string{`"192.0.2.255:8080" #!`}, `"127.0.0.1:80"`), "listener[0].bind",
			"192.0.2.255 is the broadcast address of local network 192.0.2.0/24"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { wantOneError(t, tt, hostErrors(t, tt.src)) })
	}
}

func TestCheckHostAcceptsWhatThisHostCanServe(t *testing.T) {
	tests := []struct{ name, src string }{
		{"interface address under a specific bind", listeners([]string{`"127.0.0.1:8080"`}, `"192.0.2.2:8080"`)},
		{"interface address on another port", listeners([]string{`"0.0.0.0:8080"`}, `"192.0.2.2:8081"`)},
		{"IPv6 interface address under the IPv4 wildcard", listeners([]string{`"0.0.0.0:8080"`}, `"[fd00::2]:8080"`)},
		{"remote address under a wildcard", listeners([]string{`"0.0.0.0:8080"`}, `"192.0.2.3:8080"`)},
		{"top of a /31 is a host", listeners([]string{`"127.0.0.1:8080"`}, `"198.51.100.7:80"`)},
		{"the reference config", mustRead(t, referencePath)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if errs := hostErrors(t, tt.src); errs != nil {
				t.Fatalf("CheckHost: %v", errs)
			}
		})
	}
}

func TestCheckHostReadsTheAdminToken(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	good := write("good", "s3cret\n")
	tests := []struct {
		name, listen, file, msg string
	}{
		{"readable token", "127.0.0.1:9090", good, ""},
		{"no token file", "127.0.0.1:9090", "", ""},
		{"endpoint off: the file is unused", "", filepath.Join(dir, "missing"), ""},
		{"missing file", "127.0.0.1:9090", filepath.Join(dir, "missing"), "cannot read the admin token: open " + filepath.Join(dir, "missing")},
		{"empty file", "127.0.0.1:9090", write("empty", " \n\t\n"), "is empty: write the token the POST routes are to require"},
		{"two lines", "127.0.0.1:9090", write("lines", "one\ntwo\n"), "holds control characters (several lines?)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := validBase + "[admin]\nlisten = \"" + tt.listen + "\"\ntoken_file = \"" + tt.file + "\" #!\n"
			errs := hostErrors(t, src)
			if tt.msg == "" {
				if errs != nil {
					t.Fatalf("CheckHost: %v", errs)
				}
				return
			}
			wantOneError(t, problem{tt.name, src, "admin.token_file", tt.msg}, errs)
		})
	}
}

// TestCheckHostWithoutPositions checks a Config that did not come from
// Parse (built in code) can still be checked; its errors have no line.
func TestCheckHostWithoutPositions(t *testing.T) {
	cfg := &Config{
		Admin:     Admin{Listen: ""},
		Listeners: []Listener{{Name: "a", Bind: "0.0.0.0:80", Pool: "p"}},
		Pools:     map[string]*Pool{"p": {Name: "p", Backends: []Backend{{Addr: "192.0.2.2:80", Weight: 1}}}},
		PoolNames: []string{"p"},
	}
	var errs Errors
	if err := cfg.CheckHost(testHost); !errors.As(err, &errs) || len(errs) != 1 || errs[0].Line != 0 || errs[0].Key != "pool.p.backend[0].addr" {
		t.Fatalf("CheckHost = %v, want one error for pool.p.backend[0].addr without a line", err)
	}
}

func TestBroadcast(t *testing.T) {
	tests := []struct {
		prefix, want string
	}{
		{"192.0.2.2/24", "192.0.2.255"},
		{"10.1.2.3/8", "10.255.255.255"},
		{"172.16.5.4/20", "172.16.15.255"},
		{"10.0.0.1/30", "10.0.0.3"},
		{"0.0.0.0/0", "255.255.255.255"},
		{"10.0.0.0/31", ""},
		{"10.0.0.1/32", ""},
		{"fd00::2/64", ""},
	}
	for _, tt := range tests {
		got, ok := broadcast(netip.MustParsePrefix(tt.prefix))
		if (tt.want == "") != !ok || ok && got.String() != tt.want {
			t.Errorf("broadcast(%s) = %v %v, want %q", tt.prefix, got, ok, tt.want)
		}
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
