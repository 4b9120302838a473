package main

import (
	"fmt"
	"os/exec"
	"strconv"
	"strings"
)

// Kernel counters the longlived scenario reads: nstat's SNMP/netstat
// counters inside a namespace (listen-queue overflows, SYN retransmits)
// and /proc/net/sockstat's TCP buffer memory.

// nstatCounters are the counters a reconnect storm is judged by.
var nstatCounters = []string{
	"TcpExtListenOverflows", "TcpExtListenDrops", "TcpExtTCPReqQFullDrop",
	"TcpExtTCPReqQFullDoCookies", "TcpExtSyncookiesSent", "TcpExtTCPSynRetrans",
	"TcpExtTCPBacklogDrop", "TcpAttemptFails", "TcpEstabResets", "TcpOutRsts",
}

// parseNstat reads `nstat -az` output ("Name  value  rate" lines after a
// "#kernel" header) into name -> value.
func parseNstat(out string) map[string]uint64 {
	m := map[string]uint64{}
	for line := range strings.SplitSeq(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if v, err := strconv.ParseUint(f[1], 10, 64); err == nil {
			m[f[0]] = v
		}
	}
	return m
}

// nstatDelta is after minus before for every counter named in either.
func nstatDelta(before, after map[string]uint64) map[string]uint64 {
	d := map[string]uint64{}
	for k, v := range after {
		if v >= before[k] {
			d[k] = v - before[k]
		}
	}
	return d
}

// readNstat runs nstat inside namespace ns: absolute values (-a), zeros
// too (-z), without touching nstat's history file (-s).
func readNstat(ns string) (map[string]uint64, error) {
	out, err := exec.Command("ip", "netns", "exec", ns, "nstat", "-asz").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("nstat in %s: %v: %s", ns, err, firstLine(string(out)))
	}
	return parseNstat(string(out)), nil
}

// parseSockstatTCPMem is the TCP line's "mem" field of /proc/net/sockstat:
// pages of socket buffer memory, counted system-wide.
func parseSockstatTCPMem(b []byte) (pages uint64, ok bool) {
	for line := range strings.SplitSeq(string(b), "\n") {
		rest, found := strings.CutPrefix(line, "TCP:")
		if !found {
			continue
		}
		f := strings.Fields(rest)
		for i := 0; i+1 < len(f); i += 2 {
			if f[i] == "mem" {
				v, err := strconv.ParseUint(f[i+1], 10, 64)
				return v, err == nil
			}
		}
	}
	return 0, false
}

// parseSockstatUsed is the "sockets: used N" line of /proc/net/sockstat:
// every socket the kernel still holds, in any namespace.
func parseSockstatUsed(b []byte) (n uint64, ok bool) {
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, found := strings.CutPrefix(line, "sockets: used "); found {
			v, err := strconv.ParseUint(strings.TrimSpace(rest), 10, 64)
			return v, err == nil
		}
	}
	return 0, false
}
