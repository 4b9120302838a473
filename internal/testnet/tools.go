package testnet

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The one policy for the programs tests drive (ip, nft, redis-server,
// dnsmasq, nginx, haproxy, strace, ...): a test that needs one and does
// not find it fails as root or with the CI environment variable set, with
// the apt-get line that installs it, and skips otherwise. CI runs as root and .ci/run installs every one of them,
// so there no such test can pass by skipping; a developer without root
// (who could not run most of them anyway) is not made to install them.

// ToolPath finds the program name on PATH or in the sbin and bin
// directories Debian puts programs in (a PATH without sbin is common for
// a non-root shell); "" when it is not installed.
func ToolPath(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, dir := range []string{"/usr/sbin", "/sbin", "/usr/bin", "/bin", "/usr/local/bin"} {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// NeedTool returns the path of the program name, from Debian's package
// pkg, by the policy above.
func NeedTool(t testing.TB, name, pkg string) string {
	t.Helper()
	if p := ToolPath(name); p != "" {
		return p
	}
	Missing(t, fmt.Sprintf("%s not installed", name), pkg)
	return ""
}

// Missing applies the policy to something a test needs that is not here
// (msg says what), installed by the Debian packages pkgs.
func Missing(t testing.TB, msg string, pkgs ...string) {
	t.Helper()
	install := "apt-get install"
	for _, p := range pkgs {
		install += " " + p
	}
	if os.Geteuid() == 0 || os.Getenv("CI") != "" {
		t.Fatalf("%s: as root or under CI this test must run: %s (.ci/run does)", msg, install)
		return
	}
	t.Skipf("%s (%s); not root, so skipping", msg, install)
}

// allowNoRootEnv, set to 1, lets RequireRoot skip: a developer's explicit
// choice, since a skip is silent in go test's summary.
const allowNoRootEnv = "L4LB_TEST_ALLOW_NO_ROOT"

// RequireRoot is for the tests that are the product's headline (a stale
// dial never closes a breaker, on one instance or across a fleet): they
// need root for network namespaces and nftables, and rather than skip
// silently without it they fail, unless L4LB_TEST_ALLOW_NO_ROOT=1 says
// skipping is meant.
func RequireRoot(t testing.TB, why string) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv(allowNoRootEnv) == "1" {
		t.Skipf("needs root (%s); skipped as %s=1 asks", why, allowNoRootEnv)
	}
	t.Fatalf("needs root (%s): run the tests as root, or set %s=1 to skip this one knowingly", why, allowNoRootEnv)
}
