package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
	"time"

	"github.com/l4lb/l4lb/pkg/admin"
	"github.com/l4lb/l4lb/pkg/config"
)

// ctlClient sends l4lb ctl's request to one admin endpoint.
type ctlClient struct {
	addr  string // host:port, as dialed
	token string // "": none sent
	http  *http.Client
}

// ctlUsageError is a command line that says nowhere to send the request
// (exit 2, not 1).
type ctlUsageError struct{ msg string }

func (e *ctlUsageError) Error() string { return e.msg }

// ctlUsageOr is the exit code of err from newCtlClient.
func ctlUsageOr(err error) int {
	var u *ctlUsageError
	if errors.As(err, &u) {
		return 2
	}
	return 1
}

// ctlTimeout bounds a request: the API answers at once (a drain runs on
// after its 202); a reload builds every pool first.
const ctlTimeout = time.Minute

// newCtlClient finds the endpoint and, for a request that acts, the
// token: the flags first, then the configuration file's [admin].
func newCtlClient(o ctlOptions, acts bool) (*ctlClient, error) {
	addr, token := o.admin, o.token
	needsFile := addr == "" || (acts && token == "")
	if needsFile && o.config != "" {
		a, err := config.LoadAdmin(o.config)
		if err != nil {
			return nil, err
		}
		if addr == "" {
			if a.Listen == "" {
				return nil, fmt.Errorf("%s turns the admin endpoint off ([admin] listen = \"\"): there is no API to reach", o.config)
			}
			addr = a.Listen
		}
		if acts && token == "" {
			// As run reads it, so a token run would refuse is refused here.
			if token, err = admin.ReadToken(a.TokenFile); err != nil {
				return nil, fmt.Errorf("%s: %w", o.config, err)
			}
		}
	}
	if addr == "" {
		return nil, &ctlUsageError{"say where the admin API is: -admin ADDR, or -config FILE (the file l4lb runs, whose [admin] listen it reads)"}
	}
	dial, err := dialable(addr)
	if err != nil {
		return nil, &ctlUsageError{err.Error()}
	}
	return &ctlClient{addr: dial, token: token, http: &http.Client{
		Timeout: ctlTimeout,
		// Never through a proxy from the environment: the endpoint
		// refuses a request line that names a host.
		Transport: &http.Transport{Proxy: nil, DialContext: (&net.Dialer{Timeout: 10 * time.Second}).DialContext},
	}}, nil
}

// dialable is the address to reach an endpoint listening on addr: an
// unspecified host (0.0.0.0, [::]) is reached on the loopback address of
// its family. A host name other than localhost is refused here, as the
// endpoint would refuse its Host header.
func dialable(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("admin address %q is not IP:port, e.g. 127.0.0.1:9090", addr)
	}
	if strings.EqualFold(host, "localhost") {
		return addr, nil
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return "", fmt.Errorf("admin address %q: the host must be an IP address or localhost (the endpoint refuses other names)", addr)
	}
	ip = ip.Unmap()
	switch {
	case ip.IsUnspecified() && ip.Is4():
		ip = netip.AddrFrom4([4]byte{127, 0, 0, 1})
	case ip.IsUnspecified():
		ip = netip.IPv6Loopback()
	}
	return net.JoinHostPort(ip.String(), port), nil
}

// do sends req and returns the answer's status and body; err says why
// there is none.
func (c *ctlClient) do(req ctlRequest) (status int, body []byte, err error) {
	hreq, err := http.NewRequest(req.method, "http://"+c.addr+req.path, bytes.NewReader(req.body))
	if err != nil {
		return 0, nil, err
	}
	if req.body != nil {
		hreq.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" && req.acts() {
		hreq.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(hreq)
	if err != nil {
		return 0, nil, fmt.Errorf("cannot reach the admin API at %s: %s", c.addr, unreachable(err))
	}
	defer resp.Body.Close()
	body, err = io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, fmt.Errorf("the admin API at %s broke off its answer: %s", c.addr, unreachable(err))
	}
	return resp.StatusCode, body, nil
}

// unreachable is why a request got no answer, without the request
// repeated: "connection refused".
func unreachable(err error) string {
	var errno syscall.Errno
	var timeout interface{ Timeout() bool }
	switch {
	case errors.As(err, &errno):
		return errno.Error()
	case errors.As(err, &timeout) && timeout.Timeout():
		return "no answer in time"
	}
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err.Error()
		}
		err = next
	}
}

// printAPIError says what the API refused, and for a reload every
// problem it found.
func printAPIError(w io.Writer, status int, body []byte) {
	var e admin.ErrorJSON
	if json.Unmarshal(body, &e) != nil || e.Error == "" {
		text := strings.TrimSpace(string(body))
		if len(text) > 200 {
			text = text[:200] + "..."
		}
		fmt.Fprintf(w, "ctl: the endpoint answered %d %s, not as l4lb's admin API does: %q\n", status, http.StatusText(status), text)
		return
	}
	fmt.Fprintf(w, "ctl: %s (%d %s)\n", e.Error, status, http.StatusText(status))
	for _, line := range e.Errors {
		fmt.Fprintf(w, "  %s\n", line)
	}
	if status == http.StatusUnauthorized {
		fmt.Fprintln(w, "ctl: give it with -token T, or -config FILE (the file l4lb runs, whose [admin] token_file holds it)")
	}
}
