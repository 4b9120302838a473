package accesslog

import (
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/syslog"
)

// syslogDaemon is a unixgram socket standing for the daemon, and a
// writer to it.
func syslogDaemon(t *testing.T) (*net.UnixConn, *syslog.Writer) {
	t.Helper()
	path := testnet.UnixgramPath(t)
	c := testnet.ListenUnixgram(t, path)
	addr, _ := syslog.ParseAddress(path)
	local1, _ := syslog.ParseFacility("local1")
	w, err := syslog.Open(syslog.Config{Address: addr, Facility: local1, MsgID: "access", Hostname: "lb1"})
	if err != nil {
		t.Fatal(err)
	}
	return c, w
}

// With a syslog writer, each record is one message: RFC 5424 at info,
// stamped with the record's end, its body the record's JSON.
func TestRecordsToSyslog(t *testing.T) {
	testnet.CheckLeaks(t)
	c, w := syslogDaemon(t)
	l, err := Open(Config{Format: FormatText, Syslog: w, Loops: 2}) // Format is not syslog's
	if err != nil {
		t.Fatal(err)
	}
	second := sample
	second.Listener, second.End = "db", sample.End+1000
	l.Queue().Push(0, &sample)
	l.Queue().Push(1, &second)
	want := map[string]bool{}
	for _, r := range []*Record{&sample, &second} {
		body := AppendJSON(nil, r)
		want["<142>1 "+time.Unix(0, r.End).UTC().Format("2006-01-02T15:04:05.000000Z")+" lb1 l4lb "+
			strconv.Itoa(os.Getpid())+" access - "+string(body[:len(body)-1])] = true
	}
	for range 2 {
		got := string(testnet.ReadDatagram(t, c))
		if !want[got] {
			t.Fatalf("got %q, want one of %v", got, want)
		}
		delete(want, got)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if w.Send(syslog.SeverityInfo, time.Now(), []byte("x")) {
		t.Fatal("the Log left its syslog writer open")
	}
}

// A daemon that never reads: the writer goes on taking records from the
// queue (the loops' rings never fill because of syslog), each one it
// cannot send counted as dropped, here and by the syslog writer.
func TestFullSyslogDropsAndCounts(t *testing.T) {
	testnet.CheckLeaks(t)
	_, w := syslogDaemon(t)
	l, err := Open(Config{Syslog: w, Loops: 1, QueueSize: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const records = 5000 // many times what the socket queues
	for i := range records {
		l.Queue().Push(0, &sample)
		if i%32 == 31 { // let the writer drain the ring of 64
			testnet.Eventually(t, "the writer drains its ring", func() bool { return !l.Queue().pending() })
		}
	}
	testnet.Eventually(t, "every record sent or dropped", func() bool {
		d := w.Dropped()
		return !l.Queue().pending() && d[syslog.ReasonFull] > 0 && l.Dropped() == d[syslog.ReasonFull]
	})
	if d := w.Dropped(); d[syslog.ReasonFull] >= records || d[syslog.ReasonUnreachable]+d[syslog.ReasonError] != 0 {
		t.Fatalf("drops %v of %d records: want some sent, the rest full", d, records)
	}
}
