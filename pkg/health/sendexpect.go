package health

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
)

// TCPSendExpectCheck returns a Check that TCP-connects to addr with dial,
// writes send (nothing when empty: a backend that speaks first, as SMTP or
// FTP do) and reads the reply until len(expect) bytes have arrived, or one
// byte when expect is empty. It passes when the reply starts with expect.
//
// It fails when the connect fails, when the backend closes or resets the
// connection before that many bytes arrived, when a byte differs from
// expect (at once, without waiting for the rest), and when ctx's deadline
// passes first. A backend that accepts and closes at once therefore fails,
// where TCPCheck passes it. isLocal classifies errors that are local
// trouble (Inconclusive), as for TCPCheck; a ctx canceled by the caller is
// Inconclusive too once the connection is open. dial nil uses a plain
// net.Dialer. send and expect are copied.
func TCPSendExpectCheck(dial DialFunc, addr string, send, expect []byte, isLocal func(error) bool) Check {
	dial = orPlainDial(dial)
	send, expect = bytes.Clone(send), bytes.Clone(expect)
	return func(ctx context.Context) Outcome {
		conn, err := dial(ctx, "tcp", addr)
		if err != nil {
			return dialOutcome(err, isLocal)
		}
		defer conn.Close()
		stop := bindContext(ctx, conn)
		defer stop()
		if len(send) > 0 {
			if _, err := conn.Write(send); err != nil {
				return ioOutcome(ctx, "sending the request", err, isLocal)
			}
		}
		reply := make([]byte, max(len(expect), 1))
		for got := 0; got < len(reply); {
			n, err := conn.Read(reply[got:])
			if len(expect) > 0 && !bytes.Equal(reply[got:got+n], expect[got:got+n]) {
				// A wrong reply: the rest cannot mend it.
				return Outcome{Result: Fail, Err: wrongReply(reply[:got+n], expect)}
			}
			got += n
			switch {
			case got == len(reply):
			case errors.Is(err, io.EOF):
				return Outcome{Result: Fail, Err: closedEarly(reply[:got], expect)}
			case err != nil:
				doing := fmt.Sprintf("reading the reply (got %d of %d bytes)", got, len(reply))
				return ioOutcome(ctx, doing, err, isLocal)
			}
		}
		return Outcome{Result: Pass}
	}
}

// wrongReply is the cause of a reply that differs from expect.
func wrongReply(reply, expect []byte) error {
	got, want := showPair(reply, expect)
	if len(reply) < len(expect) && bytes.HasPrefix(expect, reply) {
		// A datagram too short to hold expect (TCP reads on instead).
		return fmt.Errorf("reply %s is shorter than expected %s (%d of %d bytes)", got, want, len(reply), len(expect))
	}
	return fmt.Errorf("reply %s does not start with expected %s", got, want)
}

// closedEarly is the cause of a TCP reply cut short by the backend's FIN:
// got came before it, of expect (at least one byte when expect is empty).
func closedEarly(got, expect []byte) error {
	if len(expect) == 0 {
		return errors.New("closed by the backend before any reply (expected at least 1 byte)")
	}
	shown, want := showPair(got, expect)
	if len(got) == 0 {
		return fmt.Errorf("closed by the backend before the expected reply was complete (got 0 of %d bytes, expected %s)",
			len(expect), want)
	}
	return fmt.Errorf("closed by the backend before the expected reply was complete (got %d of %d bytes: %s, expected %s)",
		len(got), len(expect), shown, want)
}

// UDPSendExpectCheck returns a Check that opens a connected UDP socket to
// addr with dial (network "udp"), sends send as one datagram (an empty
// datagram when send is empty) and waits for one datagram from addr. It
// passes when that datagram starts with expect; any datagram passes when
// expect is empty.
//
// It fails when the wait ends with an ICMP error (port unreachable comes
// back as ECONNREFUSED on the connected socket, and fails at once, without
// waiting out the timeout), when the reply differs, and when ctx's deadline
// passes with no reply. Only datagrams from addr count: a backend that
// answers from another address (a wildcard-bound server on a host with
// several) is silent to this check, as it is to the data path's connected
// session sockets.
//
// One datagram per check, never resent: a lost request or reply fails this
// check, and the prober's interval and rise/fall are the retries (a
// backend goes down only after fall consecutive failures). Resending inside
// one check would hide a lossy backend the data path's clients see, and
// spend the timeout on guesses at how long a reply takes.
//
// isLocal classifies errors that are local trouble (Inconclusive); a ctx
// canceled by the caller is Inconclusive too once the socket is open. dial
// nil uses a plain net.Dialer. send and expect are copied.
func UDPSendExpectCheck(dial DialFunc, addr string, send, expect []byte, isLocal func(error) bool) Check {
	dial = orPlainDial(dial)
	send, expect = bytes.Clone(send), bytes.Clone(expect)
	return func(ctx context.Context) Outcome {
		conn, err := dial(ctx, "udp", addr)
		if err != nil {
			return dialOutcome(err, isLocal)
		}
		defer conn.Close()
		stop := bindContext(ctx, conn)
		defer stop()
		if _, err := conn.Write(send); err != nil {
			return ioOutcome(ctx, "sending the request", err, isLocal)
		}
		// Only the first len(expect) bytes matter: a longer datagram is
		// truncated into reply, a shorter one cannot match.
		reply := make([]byte, max(len(expect), 1))
		n, err := conn.Read(reply)
		if err != nil {
			return ioOutcome(ctx, "waiting for the reply", err, isLocal)
		}
		if !bytes.HasPrefix(reply[:n], expect) {
			return Outcome{Result: Fail, Err: wrongReply(reply[:n], expect)}
		}
		return Outcome{Result: Pass}
	}
}

// UDPRefusalCheck returns a Check for a UDP backend with no request of its
// own to answer (the breaker's recovery probe of a UDP pool with no
// send-expect check): it sends one empty datagram on a connected UDP socket
// to addr (dial, network "udp") and waits until ctx is done.
//
// It fails on an ICMP error: port unreachable (ECONNREFUSED, at once), host
// or network unreachable (EHOSTUNREACH, ENETUNREACH). It passes on a reply,
// and it passes on silence: a UDP backend need not answer an empty
// datagram, so silence is no evidence of refusal, and the check passes for
// lack of it. ICMP can be lost or filtered, so a pass says only that the
// backend was not seen to refuse.
//
// ctx must carry a deadline: the wait for an ICMP error lasts until it. A
// ctx canceled by the caller, or one whose deadline passed before the
// datagram went out, is Inconclusive; isLocal classifies local trouble
// (Inconclusive). dial nil uses a plain net.Dialer.
func UDPRefusalCheck(dial DialFunc, addr string, isLocal func(error) bool) Check {
	dial = orPlainDial(dial)
	return func(ctx context.Context) Outcome {
		conn, err := dial(ctx, "udp", addr)
		if err != nil {
			if isTimeout(err) {
				return outOfTime("opening the socket", err) // no time left to ask anything
			}
			return dialOutcome(err, isLocal)
		}
		defer conn.Close()
		stop := bindContext(ctx, conn)
		defer stop()
		if _, err := conn.Write(nil); err != nil {
			if isTimeout(err) {
				return outOfTime("sending the probe datagram", err) // no time left to ask anything
			}
			return ioOutcome(ctx, "sending the probe datagram", err, isLocal)
		}
		var reply [1]byte
		_, err = conn.Read(reply[:])
		switch {
		case err == nil:
			return Outcome{Result: Pass} // an answer: not refused
		case errors.Is(ctx.Err(), context.Canceled):
			return ioOutcome(ctx, "waiting for a refusal", err, isLocal) // Inconclusive
		case isTimeout(err):
			return Outcome{Result: Pass} // silence: no evidence of refusal
		}
		return ioOutcome(ctx, "waiting for a refusal", err, isLocal)
	}
}

// outOfTime is the Inconclusive of a refusal probe whose deadline passed
// before its datagram went out: nothing was asked, nothing learned.
func outOfTime(doing string, err error) Outcome {
	return Outcome{Result: Inconclusive, Err: fmt.Errorf("%s: out of time before the probe was sent: %w", doing, err)}
}
