package syslog

import (
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
)

// BenchmarkSend is the cost of one access-record-sized message to a
// unixgram socket a goroutine drains: what the access log's writer pays
// per record with access = "syslog".
func BenchmarkSend(b *testing.B) {
	path := testnet.UnixgramPath(b)
	c := testnet.ListenUnixgram(b, path)
	go func() {
		buf := make([]byte, 65536)
		for {
			if _, _, err := c.ReadFrom(buf); err != nil {
				return
			}
		}
	}()
	w, err := Open(Config{Address: Address{Network: NetworkUnixgram, Path: path}, MsgID: "access"})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	body := []byte(`{"time":"2026-12-01T17:07:23.123456Z","listener":"web","pool":"web","client":"192.0.2.7:51234","backend":"10.0.0.1:8080","to_backend":64,"to_client":1024,"duration":0.003512,"reason":"completed","result":"ok"}`)
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		w.Send(SeverityInfo, now, body)
	}
	d := w.Dropped()
	b.ReportMetric(float64(d[ReasonFull])/float64(b.N), "full/op")
}
