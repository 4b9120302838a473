package main

import "golang.org/x/sys/unix"

// Classic BPF opcodes and the ancillary offset the packet-socket filters
// (the SYN watch, the chaos capture) are written with.
const (
	bpfLdAbsB  = unix.BPF_LD | unix.BPF_B | unix.BPF_ABS
	bpfLdAbsH  = unix.BPF_LD | unix.BPF_H | unix.BPF_ABS
	bpfLdIndB  = unix.BPF_LD | unix.BPF_B | unix.BPF_IND
	bpfLdIndH  = unix.BPF_LD | unix.BPF_H | unix.BPF_IND
	bpfLdxMsh  = unix.BPF_LDX | unix.BPF_B | unix.BPF_MSH
	bpfJeq     = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	bpfJset    = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
	bpfAnd     = unix.BPF_ALU | unix.BPF_AND | unix.BPF_K
	bpfRet     = unix.BPF_RET | unix.BPF_K
	bpfPktType = 0xfffff000 + 4 // SKF_AD_OFF + SKF_AD_PKTTYPE
)

// bpfIns is one instruction without jumps.
func bpfIns(code uint16, k uint32) unix.SockFilter { return unix.SockFilter{Code: code, K: k} }
