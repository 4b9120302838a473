package testnet

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Real DNS servers and clients no one here wrote, for tests of UDP through
// l4lb: dnsmasq (Debian package dnsmasq-base) as the server, dig (package
// bind9-dnsutils) as the client. .ci/run installs both.

// DNSZone is the zone every Dnsmasq answers: any name under it (and the
// zone itself) gets one A record, the server's own Answer, so a client
// learns which server answered.
const DNSZone = "l4lb.test"

// NeedDNSTools makes sure dnsmasq and dig are installed, by the policy of
// tools.go.
func NeedDNSTools(t testing.TB) {
	t.Helper()
	var missing []string
	if dnsmasqPath() == "" {
		missing = append(missing, "dnsmasq")
	}
	if _, err := exec.LookPath("dig"); err != nil {
		missing = append(missing, "dig")
	}
	if len(missing) == 0 {
		return
	}
	Missing(t, strings.Join(missing, " and ")+" not installed", "dnsmasq-base", "bind9-dnsutils")
}

// dnsmasqPath finds dnsmasq on PATH or, for a PATH without the sbin
// directories, where Debian puts it; "" when it is not installed.
func dnsmasqPath() string { return ToolPath("dnsmasq") }

// Dnsmasq is one dnsmasq process serving DNS on a UDP (and TCP) port of
// one address, answering every name under DNSZone with Answer.
type Dnsmasq struct {
	Addr   string // ip:port
	Answer string // the A record it answers with: its tag
	ip     string
	port   int
	extra  []string // options of the test's own
	logf   *os.File

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when the running process was waited for
}

// StartDnsmasq starts dnsmasq on ip at a free port, answering with answer
// (an IPv4 address), and waits until it answers. It is killed when the
// test ends; the test is leak-checked (CheckLeaks).
func StartDnsmasq(t testing.TB, ip, answer string) *Dnsmasq {
	t.Helper()
	return StartDnsmasqWith(t, ip, answer)
}

// StartDnsmasqWith is StartDnsmasq with more dnsmasq options: records of
// the test's own (--addn-hosts, --srv-host, --local, --local-ttl, ...).
func StartDnsmasqWith(t testing.TB, ip, answer string, extra ...string) *Dnsmasq {
	t.Helper()
	CheckLeaks(t)
	logf, err := os.Create(filepath.Join(t.TempDir(), "dnsmasq-"+ip+".log"))
	if err != nil {
		t.Fatal(err)
	}
	d := &Dnsmasq{Answer: answer, ip: ip, extra: extra, logf: logf}
	t.Cleanup(func() {
		d.Kill()
		d.logf.Close()
	})
	// A port free a moment ago can be taken before dnsmasq binds it: try
	// a few.
	for try := 0; ; try++ {
		d.port = FreePort(t) // free for UDP and TCP, as dnsmasq binds both
		d.Addr = net.JoinHostPort(ip, strconv.Itoa(d.port))
		err := d.start()
		if err == nil {
			return d
		}
		if try == 4 {
			t.Fatalf("dnsmasq on %s: %v\n%s", d.Addr, err, d.Log())
		}
	}
}

// start runs dnsmasq at d.Addr and waits until it answers a query.
func (d *Dnsmasq) start() error {
	fmt.Fprintf(d.logf, "--- starting dnsmasq on %s\n", d.Addr)
	args := append([]string{
		"--keep-in-foreground", "--log-facility=-",
		"--conf-file=/dev/null", "--pid-file=",
		"--port=" + strconv.Itoa(d.port), "--listen-address=" + d.ip, "--bind-interfaces",
		"--no-resolv", "--no-hosts", "--log-queries",
		"--address=/" + DNSZone + "/" + d.Answer}, d.extra...)
	cmd := exec.Command(dnsmasqPath(), args...)
	cmd.Stdout, cmd.Stderr = d.logf, d.logf
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		close(done)
	}()
	d.mu.Lock()
	d.cmd, d.done = cmd, done
	d.mu.Unlock()
	q := DNSQuery(0x1d1d, "ready."+DNSZone)
	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case <-done:
			return fmt.Errorf("dnsmasq exited at start: %v", cmd.ProcessState)
		default:
		}
		if reply, err := ExchangeDNS(d.Addr, q, 200*time.Millisecond); err == nil && DNSAnswered(reply, 0x1d1d) {
			return nil
		}
		if time.Now().After(deadline) {
			d.Kill()
			return errors.New("dnsmasq did not answer within 20s")
		}
		time.Sleep(10 * time.Millisecond) // not bound yet: refused at once
	}
}

// Kill kills dnsmasq (SIGKILL) and waits until it is gone: its port then
// refuses (ICMP port unreachable). Killing a killed server does nothing.
func (d *Dnsmasq) Kill() {
	d.mu.Lock()
	cmd, done := d.cmd, d.done
	d.cmd = nil
	d.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Kill()
	<-done
}

// Restart starts a killed dnsmasq again on the same address and waits
// until it answers.
func (d *Dnsmasq) Restart(t testing.TB) {
	t.Helper()
	d.Kill()
	if err := d.start(); err != nil {
		t.Fatalf("dnsmasq restart on %s: %v\n%s", d.Addr, err, d.Log())
	}
}

// RestartWith restarts dnsmasq on the same address with extra options in
// place of those it ran with: dnsmasq reads its options (--srv-host
// among them) only when it starts.
func (d *Dnsmasq) RestartWith(t testing.TB, extra ...string) {
	t.Helper()
	d.Kill()
	d.extra = extra
	d.Restart(t)
}

// Reload sends dnsmasq SIGHUP: it empties its cache and reads its hosts
// files (--addn-hosts) again, not its options. dnsmasq answers from the
// new files once it has read them; the caller polls for that.
func (d *Dnsmasq) Reload(t testing.TB) {
	t.Helper()
	d.mu.Lock()
	cmd := d.cmd
	d.mu.Unlock()
	if cmd == nil {
		t.Fatalf("dnsmasq on %s: reload of a killed server", d.Addr)
	}
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatalf("dnsmasq on %s: SIGHUP: %v", d.Addr, err)
	}
}

// Log is what dnsmasq wrote so far, for failure messages.
func (d *Dnsmasq) Log() string {
	b, _ := os.ReadFile(d.logf.Name())
	return string(b)
}

// DNSQuery is a DNS query (recursion desired) for name's A record with
// the given id, as a client sends it in one datagram.
func DNSQuery(id uint16, name string) []byte {
	q := binary.BigEndian.AppendUint16(nil, id)
	q = append(q, 0x01, 0x00)       // flags: RD
	q = append(q, 0, 1, 0, 0, 0, 0) // QDCOUNT 1, ANCOUNT 0, NSCOUNT 0
	q = append(q, 0, 0)             // ARCOUNT 0
	for _, label := range strings.Split(strings.TrimSuffix(name, "."), ".") {
		q = append(q, byte(len(label)))
		q = append(q, label...)
	}
	q = append(q, 0)          // the root
	q = append(q, 0, 1, 0, 1) // QTYPE A, QCLASS IN
	return q
}

// DNSAnswered reports whether reply is an answer to query id with no
// error and at least one answer record.
func DNSAnswered(reply []byte, id uint16) bool {
	return len(reply) >= 12 && binary.BigEndian.Uint16(reply) == id &&
		reply[2]&0x80 != 0 && reply[3]&0x0f == 0 && binary.BigEndian.Uint16(reply[6:]) > 0
}

// ExchangeDNS sends q to addr once and waits up to wait for the reply.
func ExchangeDNS(addr string, q []byte, wait time.Duration) ([]byte, error) {
	c, err := net.Dial("udp", addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(wait))
	if _, err := c.Write(q); err != nil {
		return nil, err
	}
	buf := make([]byte, 4096)
	n, err := c.Read(buf)
	if err != nil {
		return nil, err
	}
	return buf[:n], nil
}

// DigResult is what one dig run printed.
type DigResult struct {
	Answer string // the first answer record (+short): the server's tag
	// Timeouts is how many of dig's tries went unanswered before the
	// answer (its own retries).
	Timeouts int
	Output   string
}

// Dig runs `dig @server -p port name A +short` from the source address
// from (-b; "" for any), with tries tries of one second each, and returns
// the answer. An error means no answer at all, with dig's output.
func Dig(server string, from, name string, tries int) (DigResult, error) {
	host, port, err := net.SplitHostPort(server)
	if err != nil {
		return DigResult{}, err
	}
	args := []string{"@" + host, "-p", port, "-4", name, "A", "+short",
		"+tries=" + strconv.Itoa(tries), "+time=1", "+nocookie"}
	if from != "" {
		args = append(args, "-b", from)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(tries)*time.Second+20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "dig", args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	r := DigResult{Output: out.String()}
	for _, line := range strings.Split(r.Output, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "":
		case strings.HasPrefix(line, ";;"):
			if strings.Contains(line, "timed out") {
				r.Timeouts++
			}
		case r.Answer == "":
			r.Answer = line
		}
	}
	if err != nil {
		return r, fmt.Errorf("dig %s from %s: %v: %s", name, from, err, strings.TrimSpace(r.Output))
	}
	if r.Answer == "" {
		return r, fmt.Errorf("dig %s from %s: no answer: %s", name, from, strings.TrimSpace(r.Output))
	}
	return r, nil
}
