package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/l4lb/l4lb/internal/e2eutil"
	"github.com/l4lb/l4lb/internal/testnet"
)

// WebSocket connections through l4lb, a real client and server on both
// sides (github.com/coder/websocket), across 3 upgrades: each connection
// sends a numbered message every 100 ms and the server echoes it. Every
// echo comes back once and in order, every connection is echoed by the
// new process once the old one is gone (within 5 s), and at the end each
// closes with the close handshake, normal closure on both sides: none was
// closed abnormally.
func TestHandoverWebSocket(t *testing.T) {
	const conns, upgrades = 50, 3
	testnet.CheckLeaks(t)
	srv := startWebSocketEcho(t)
	path, listen, _ := e2eutil.WriteConfig(t, "", []string{srv.addr}, "[global]\nshutdown_timeout = \"2s\"")
	chain := startChain(t, l4lbBin, path)

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	stop := make(chan struct{})
	halt := sync.OnceFunc(func() { close(stop) })
	var clientFails failures
	clients := make([]*wsClient, conns)
	var writers, readers sync.WaitGroup
	t.Cleanup(func() {
		halt()
		for _, c := range clients {
			if c != nil {
				c.conn.CloseNow()
			}
		}
		writers.Wait()
		readers.Wait()
	})
	for i := range clients {
		conn, _, err := websocket.Dial(ctx, "ws://"+listen+"/echo", nil)
		if err != nil {
			t.Fatalf("websocket %d through l4lb: %v", i, err)
		}
		c := &wsClient{id: i, conn: conn}
		clients[i] = c
		writers.Go(func() { c.write(ctx, stop, &clientFails) })
		readers.Go(func() { c.read(ctx, &clientFails) })
	}
	echoedSince := func(since time.Time, what string) {
		t.Helper()
		waitHeardSince(t, "every websocket to be echoed "+what, since, clients, &clientFails, &srv.fails)
	}
	echoedSince(time.Now(), "before the upgrades")
	for i := 1; i <= upgrades; i++ {
		old, served := chain.upgrade(t)
		gone := waitOldGone(t, old, served)
		echoedSince(gone, fmt.Sprintf("after upgrade %d (old pid %d gone)", i, old))
	}

	// The end: every message echoed, then the close handshake.
	halt()
	writers.Wait()
	testnet.Eventually(t, "every websocket message to be echoed", func() bool {
		for _, c := range clients {
			if c.echoed.Load() != c.sent.Load() {
				return false
			}
		}
		return true
	})
	var messages int64
	for _, c := range clients {
		c.closing.Store(true)
		if err := c.conn.Close(websocket.StatusNormalClosure, "done"); err != nil {
			t.Errorf("websocket %d: close handshake: %v", c.id, err)
		}
		messages += c.echoed.Load()
	}
	readers.Wait()
	testnet.Eventually(t, "the server to see every websocket closed", func() bool { return srv.closed.Load() == conns })
	for _, f := range []*failures{&clientFails, &srv.fails} {
		if s := f.summary(); s != "" {
			t.Fatalf("websockets failed: %s", s)
		}
	}
	checkHandedOver(t, chain.logText(), upgrades, conns, 0)
	t.Logf("%d websocket messages echoed in order over %d connections across %d upgrades, every connection closed normally", messages, conns, upgrades)
}

// wsClient is one WebSocket connection of the test's client.
type wsClient struct {
	id       int
	conn     *websocket.Conn
	sent     atomic.Int64
	echoed   atomic.Int64
	lastEcho atomic.Int64 // UnixNano
	closing  atomic.Bool  // the test began the close handshake
	failOnce
}

func (c *wsClient) heard() int64 { return c.lastEcho.Load() }

// write sends "N" (the next number) every 100 ms until stop.
func (c *wsClient) write(ctx context.Context, stop <-chan struct{}, f *failures) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		if err := c.conn.Write(ctx, websocket.MessageText, strconv.AppendInt(nil, c.sent.Load(), 10)); err != nil {
			c.fail(f, failureKind(err), "websocket %d: writing message %d: %v", c.id, c.sent.Load(), err)
			return
		}
		c.sent.Add(1)
	}
}

// read checks each echo is the next number, until the close handshake.
func (c *wsClient) read(ctx context.Context, f *failures) {
	for {
		_, msg, err := c.conn.Read(ctx)
		if err != nil {
			if !c.closing.Load() {
				c.fail(f, wsFailureKind(err), "websocket %d: after %d echoes: %v (close status %d)", c.id, c.echoed.Load(), err, websocket.CloseStatus(err))
			}
			return
		}
		if want := strconv.FormatInt(c.echoed.Load(), 10); string(msg) != want {
			c.fail(f, "out of order", "websocket %d: echo %q, want %q", c.id, msg, want)
			return
		}
		c.lastEcho.Store(time.Now().UnixNano())
		c.echoed.Add(1)
	}
}

// wsEcho is a WebSocket server echoing every message; a connection that
// ends other than by a normal closure is a failure.
type wsEcho struct {
	addr   string
	fails  failures
	closed atomic.Int64 // connections closed normally
}

func startWebSocketEcho(t *testing.T) *wsEcho {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &wsEcho{addr: ln.Addr().String()}
	mux := http.NewServeMux()
	// A handler ends with its connection (hijacked: the server's Close
	// does not end it), at the latest when the test's l4lb is killed.
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		conn, err := websocket.Accept(w, r, nil)
		if err != nil {
			e.fails.add("accept", "accept: %v", err)
			return
		}
		defer conn.CloseNow()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		for {
			typ, msg, err := conn.Read(ctx)
			if err != nil {
				if websocket.CloseStatus(err) == websocket.StatusNormalClosure {
					e.closed.Add(1)
				} else {
					e.fails.add(wsFailureKind(err), "server side: %v (close status %d)", err, websocket.CloseStatus(err))
				}
				return
			}
			if err := conn.Write(ctx, typ, msg); err != nil {
				e.fails.add(failureKind(err), "server side: echo: %v", err)
				return
			}
		}
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("websocket server: %v", err)
		}
	})
	return e
}

// wsFailureKind names how a WebSocket connection failed: closed by its
// peer with a status other than a normal closure, or as failureKind says.
func wsFailureKind(err error) string {
	if st := websocket.CloseStatus(err); st != -1 {
		return "closed with status " + st.String()
	}
	return failureKind(err)
}
