package admin

import (
	"net"
	"net/http"
	"strings"
)

// notFromBrowser refuses requests a web page could make: any request with
// an Origin header (browsers send it on cross-origin POSTs and fetches), and
// any whose Host is a name other than localhost (DNS rebinding points a
// name the attacker owns at 127.0.0.1).
//
// The Host checked must be the Host header as received. For a request line
// in absolute form ("POST http://127.0.0.1:9090/api/... HTTP/1.1") net/http
// sets r.Host from the URI and drops the Host header, so a rebinding page
// behind a proxy could pass with "Host: evil.example". The endpoint is not
// a proxy and no client of it needs that form, so any request whose URI
// names a host (absolute form, or CONNECT's authority form) is refused;
// for the rest r.Host is the header.
func notFromBrowser(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Host != "" || r.URL.Scheme != "" {
			writeError(w, http.StatusBadRequest, "request URI "+quote(r.RequestURI)+" refused: the admin endpoint is not a proxy; send the path only (\"/api/v1/...\") with a Host header")
			return
		}
		if r.Header.Get("Origin") != "" {
			writeError(w, http.StatusForbidden, "requests carrying an Origin header are refused: the admin API is not for browsers")
			return
		}
		if !hostAllowed(r.Host) {
			writeError(w, http.StatusForbidden, "Host "+quote(r.Host)+" refused: use an IP address or localhost")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func hostAllowed(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	return net.ParseIP(host) != nil
}
