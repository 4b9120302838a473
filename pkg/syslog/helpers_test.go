package syslog

import "net/netip"

func netipMust(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }
