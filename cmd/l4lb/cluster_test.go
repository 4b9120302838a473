package main

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/l4lb/l4lb/pkg/config"
)

// The instance's name carries the pid (logs, CLIENT SETNAME tell
// processes apart); the name it votes under does not, so an upgrade or
// a restart votes as the same instance. [cluster] instance names both.
func TestVoterNameOutlivesTheProcess(t *testing.T) {
	host, _ := os.Hostname()
	if host == "" {
		host = "l4lb"
	}
	if got := instanceName(config.Cluster{}); !strings.HasSuffix(got, "-"+strconv.Itoa(os.Getpid())) {
		t.Fatalf("instance name %q, want the host name and this pid", got)
	}
	if got := voterName(config.Cluster{}); got != host {
		t.Fatalf("voter name %q, want the host name %q alone", got, host)
	}
	c := config.Cluster{Instance: "edge-1"}
	if instanceName(c) != "edge-1" || voterName(c) != "edge-1" {
		t.Fatalf("with instance set: name %q, voter %q; want edge-1 for both", instanceName(c), voterName(c))
	}
}
