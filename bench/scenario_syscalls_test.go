package main

import (
	"strings"
	"testing"
)

// straceRedis is real strace 6.1 output on this machine: strace -f -c -qq
// -o FILE -p PID over a redis-server (4 threads) serving redis-benchmark,
// stopped with SIGINT.
const straceRedis = `% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
 59.48    0.011306           2      4001           write
 31.66    0.006019           1      4022           read
  6.87    0.001305           1       821           epoll_wait
  0.70    0.000134          13        10           openat
  0.68    0.000130           6        21           close
  0.23    0.000044           0        55           setsockopt
  0.18    0.000035           2        14         3 accept4
  0.15    0.000029           1        22           epoll_ctl
  0.04    0.000007           0        11           getpeername
------ ----------- ----------- --------- --------- ----------------
100.00    0.019009           2      8977         3 total
`

func TestParseStraceSummary(t *testing.T) {
	sum, err := parseStraceSummary([]byte(straceRedis))
	if err != nil {
		t.Fatal(err)
	}
	if sum.total != (straceCount{name: "total", calls: 8977, errors: 3}) {
		t.Errorf("total = %+v", sum.total)
	}
	if len(sum.calls) != 9 {
		t.Fatalf("%d rows, want 9", len(sum.calls))
	}
	// Sorted by calls, most first.
	if sum.calls[0] != (straceCount{name: "read", calls: 4022}) || sum.calls[1].name != "write" {
		t.Errorf("first rows = %+v", sum.calls[:2])
	}
	for _, c := range sum.calls {
		if c.name == "accept4" && (c.calls != 14 || c.errors != 3) {
			t.Errorf("accept4 = %+v", c)
		}
	}
}

// straceL4lb is real output of this scenario (go run ./bench -quick
// -scenario syscalls): l4lb, one event loop, 2000 connections.
const straceL4lb = `% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
 40.99    3.080268        3201       962        63 futex
 23.64    1.776242         351      5056           nanosleep
 22.21    1.668747        1033      1615           epoll_pwait
  2.93    0.220516          27      8000           read
  2.01    0.150906          37      4000           write
  1.80    0.135034          33      4000           close
  1.48    0.111445          27      4000           epoll_ctl
  1.21    0.091206          45      2000      2000 connect
  0.95    0.071613          35      2000           shutdown
  0.95    0.071041          28      2500       500 accept4
  0.81    0.060638          30      2000           socket
  0.76    0.056981          28      2000           setsockopt
  0.09    0.007060          35       198           tgkill
  0.09    0.006415          32       198         6 rt_sigreturn
  0.07    0.005389          27       198           getpid
  0.00    0.000262          87         3           mmap
  0.00    0.000200          33         6           rt_sigprocmask
  0.00    0.000154         154         1           clone3
  0.00    0.000118          59         2           mprotect
  0.00    0.000102          51         2           sigaltstack
  0.00    0.000074          37         2           sched_yield
  0.00    0.000049          49         1           rseq
  0.00    0.000026          26         1           set_robust_list
  0.00    0.000021          21         1         1 restart_syscall
  0.00    0.000007           7         1           gettid
------ ----------- ----------- --------- --------- ----------------
100.00    7.514514         193     38747      2570 total
`

func TestParseStraceSummaryProxy(t *testing.T) {
	sum, err := parseStraceSummary([]byte(straceL4lb))
	if err != nil {
		t.Fatal(err)
	}
	if sum.total.calls != 38747 || sum.total.errors != 2570 || len(sum.calls) != 25 {
		t.Errorf("total = %+v, %d rows", sum.total, len(sum.calls))
	}
	want := map[string]straceCount{
		"connect":         {name: "connect", calls: 2000, errors: 2000},
		"accept4":         {name: "accept4", calls: 2500, errors: 500},
		"read":            {name: "read", calls: 8000},
		"restart_syscall": {name: "restart_syscall", calls: 1, errors: 1},
	}
	for _, c := range sum.calls {
		if w, ok := want[c.name]; ok && c != w {
			t.Errorf("%s = %+v, want %+v", c.name, c, w)
		}
	}
	if sum.calls[0].name != "read" || sum.calls[1].name != "nanosleep" {
		t.Errorf("not sorted by calls: %+v", sum.calls[:2])
	}
}

func TestParseStraceSummaryBad(t *testing.T) {
	cases := map[string]string{
		"empty (strace saw no call)": "",
		"no total":                   strings.Split(straceRedis, "------ ----------- ----------- --------- --------- ----------------\n100")[0],
		"rows do not add up":         strings.Replace(straceRedis, "4001", "4002", 1),
		"unknown header":             strings.Replace(straceRedis, "errors syscall", "syscall", 1),
	}
	for name, in := range cases {
		if _, err := parseStraceSummary([]byte(in)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestTracerPid(t *testing.T) {
	// This test process is not traced (unless run under a debugger).
	if got := tracerPid("/proc/self/status"); got == "" {
		t.Error("no TracerPid line in /proc/self/status")
	}
	if got := tracerPid("/proc/self/nonexistent"); got != "" {
		t.Errorf("missing file: %q", got)
	}
}
