package main

import (
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// The longlived scenario's network: three namespaces the harness creates
// and removes, clients ("cli"), proxies ("lb") and backends ("srv"), joined
// by two veth pairs, lb routing between the other two (for direct).
// Nothing in them has a route anywhere else, and every address is in
// llNet, which the client and backend roles refuse to leave.
//
//	cli  tolb 10.231.1.1..C  ── tocli 10.231.1.254, listeners 10.231.1.101..  lb
//	lb   tosrv 10.231.2.254  ── tolb  10.231.2.1..B (a backend process each)  srv
//
// Several client addresses, a listener address per proxy instance and an
// address per backend process, and an ephemeral range of 10000-65535 in
// each namespace: no (source, destination) pair carries more than a few
// thousand connections at 100,000.
var llNet = netip.MustParsePrefix("10.231.0.0/16")

const (
	llNSPrefix  = "l4lbll-"
	llPortRange = "10000 65535"
	llClientIPs = 8
)

type llTopology struct {
	cli, lb, srv string
	clientIPs    []string
	listenIPs    []string // one per proxy instance
	backendIPs   []string // one per backend process
}

func llAddr(subnet, host int) string { return fmt.Sprintf("10.231.%d.%d", subnet, host) }

// llRun runs one command, its output in the error.
func llRun(args ...string) error {
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// inNS is argv run inside namespace ns.
func inNS(ns string, argv ...string) []string {
	return append([]string{"ip", "netns", "exec", ns}, argv...)
}

// newLLTopology builds the namespaces for shards listener addresses and
// backends backend addresses; on error what was made is removed.
func newLLTopology(tag string, shards, backends int) (t *llTopology, err error) {
	if shards > 100 || backends > 100 {
		return nil, fmt.Errorf("at most 100 proxy instances and 100 backends (asked %d, %d)", shards, backends)
	}
	base := llNSPrefix + strconv.Itoa(os.Getpid()) + "-" + tag
	t = &llTopology{cli: base + "-cli", lb: base + "-lb", srv: base + "-srv"}
	for i := range llClientIPs {
		t.clientIPs = append(t.clientIPs, llAddr(1, 1+i))
	}
	for i := range shards {
		t.listenIPs = append(t.listenIPs, llAddr(1, 101+i))
	}
	for i := range backends {
		t.backendIPs = append(t.backendIPs, llAddr(2, 1+i))
	}
	defer func() {
		if err != nil {
			t.remove(io.Discard)
		}
	}()
	var cmds [][]string
	for _, ns := range []string{t.cli, t.lb, t.srv} {
		cmds = append(cmds, []string{"ip", "netns", "add", ns}, []string{"ip", "-n", ns, "link", "set", "lo", "up"})
	}
	cmds = append(cmds,
		[]string{"ip", "-n", t.cli, "link", "add", "tolb", "type", "veth", "peer", "name", "tocli", "netns", t.lb},
		[]string{"ip", "-n", t.srv, "link", "add", "tolb", "type", "veth", "peer", "name", "tosrv", "netns", t.lb})
	addr := func(ns, dev, ip string) []string {
		return []string{"ip", "-n", ns, "addr", "add", ip + "/24", "dev", dev}
	}
	for _, ip := range t.clientIPs {
		cmds = append(cmds, addr(t.cli, "tolb", ip))
	}
	cmds = append(cmds, addr(t.lb, "tocli", llAddr(1, 254)), addr(t.lb, "tosrv", llAddr(2, 254)))
	for _, ip := range t.listenIPs {
		cmds = append(cmds, addr(t.lb, "tocli", ip))
	}
	for _, ip := range t.backendIPs {
		cmds = append(cmds, addr(t.srv, "tolb", ip))
	}
	cmds = append(cmds,
		[]string{"ip", "-n", t.cli, "link", "set", "tolb", "up"},
		[]string{"ip", "-n", t.lb, "link", "set", "tocli", "up"},
		[]string{"ip", "-n", t.lb, "link", "set", "tosrv", "up"},
		[]string{"ip", "-n", t.srv, "link", "set", "tolb", "up"},
		[]string{"ip", "-n", t.cli, "route", "add", "10.231.2.0/24", "via", llAddr(1, 254)},
		[]string{"ip", "-n", t.srv, "route", "add", "10.231.1.0/24", "via", llAddr(2, 254)},
		inNS(t.lb, "sysctl", "-qw", "net.ipv4.ip_forward=1"))
	for _, ns := range []string{t.cli, t.lb, t.srv} {
		cmds = append(cmds, inNS(ns, "sysctl", "-qw", "net.ipv4.ip_local_port_range="+llPortRange))
	}
	for _, c := range cmds {
		if err := llRun(c...); err != nil {
			return t, err
		}
	}
	return t, nil
}

// sysctls reads a few per-namespace settings the storm depends on.
func (t *llTopology) sysctls() string {
	var parts []string
	for _, k := range []string{"net.core.somaxconn", "net.ipv4.tcp_max_syn_backlog", "net.ipv4.tcp_syncookies"} {
		out, _ := exec.Command("ip", "netns", "exec", t.lb, "sysctl", "-n", k).Output()
		parts = append(parts, k+"="+strings.TrimSpace(string(out)))
	}
	return strings.Join(parts, ", ")
}

// remove deletes the namespaces (and with them the veth pairs).
func (t *llTopology) remove(log io.Writer) {
	for _, ns := range []string{t.cli, t.lb, t.srv} {
		if exec.Command("ip", "netns", "pids", ns).Run() != nil {
			continue // never made
		}
		if err := llRun("ip", "netns", "del", ns); err != nil {
			fmt.Fprintf(log, "longlived: %v\n", err)
		}
	}
}
