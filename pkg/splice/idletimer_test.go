package splice

import (
	"io"
	"net"
	"testing"
	"testing/synctest"
	"time"
)

// The idle timer's logic on a fake clock (testing/synctest), through the
// copy path: the ends are net.Pipes, on which waiting is durable, so the
// bubble's clock moves only when everything waits. Exact to the
// nanosecond, however busy the machine. (TestRelayIdleTimeout covers the
// same on real sockets and the splice path, where only bounds can be
// measured.)
func TestIdleTimerOnFakeClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const idle = 300 * time.Millisecond
		r := NewRelayer(Config{IdleTimeout: idle})
		type conn struct {
			client, backend net.Conn // the test's ends
			result          chan Result
		}
		open := func() conn {
			clientApp, clientRelay := net.Pipe()
			backendRelay, backendApp := net.Pipe()
			c := conn{clientApp, backendApp, make(chan Result, 1)}
			go func() { c.result <- r.Relay(clientRelay, backendRelay, nil) }()
			t.Cleanup(func() { clientApp.Close(); backendApp.Close() })
			return c
		}
		// ended reports whether c's relay is over, once everything that
		// can run at this instant has.
		ended := func(c conn) (Result, bool) {
			synctest.Wait()
			select {
			case res := <-c.result:
				c.result <- res
				return res, true
			default:
				return Result{}, false
			}
		}
		// endsAt checks that c ends exactly at the given instant.
		endsAt := func(name string, c conn, at time.Time) {
			t.Helper()
			time.Sleep(time.Until(at) - time.Nanosecond)
			if _, over := ended(c); over {
				t.Fatalf("%s ended before its idle timeout", name)
			}
			time.Sleep(time.Nanosecond)
			res, over := ended(c)
			if !over {
				t.Fatalf("%s still up an idle timeout after its last byte", name)
			}
			if res.Outcome != IdleTimeout {
				t.Fatalf("%s outcome %v, want idle-timeout", name, res.Outcome)
			}
		}

		start := time.Now()
		silent := open()
		oneWay := open()
		go io.Copy(io.Discard, oneWay.backend) // the backend reads what comes

		// oneWay carries a byte one way every idle/3 for 4 idle periods.
		lastWrite := make(chan time.Time, 1)
		go func() {
			var last time.Time
			defer func() { lastWrite <- last }()
			for time.Since(start) < 4*idle {
				time.Sleep(idle / 3)
				if _, err := oneWay.client.Write([]byte{'x'}); err != nil {
					return
				}
				last = time.Now()
			}
		}()
		endsAt("silent connection", silent, start.Add(idle))
		last := <-lastWrite
		if want := start.Add(4 * idle); !last.Equal(want) {
			t.Fatalf("one-way connection cut while traffic flowed: last write at %v, want %v", last.Sub(start), want.Sub(start))
		}
		if res, over := ended(oneWay); over {
			t.Fatalf("one-way connection ended (%v) although traffic kept flowing", res.Outcome)
		}
		endsAt("one-way connection", oneWay, last.Add(idle))
	})
}
