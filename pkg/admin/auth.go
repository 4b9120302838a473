package admin

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"os"
	"strings"
)

// ReadToken reads the bearer token from path ([admin] token_file): the
// file's content without surrounding white space (editors add a newline).
// "" means no token. An unreadable or empty file, or one no header can
// carry, is an error naming it, so a typo in the path cannot silently leave
// the API open.
func ReadToken(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("admin token_file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	switch {
	case tok == "":
		return "", fmt.Errorf("admin token_file %s is empty: write the token into it, or remove token_file", path)
	case strings.ContainsFunc(tok, func(r rune) bool { return r < ' ' || r == 0x7f }):
		// As l4lb check says (pkg/config): no header could carry it.
		return "", fmt.Errorf("admin token_file %s holds control characters (several lines?): an Authorization header cannot carry them", path)
	}
	return tok, nil
}

// requireToken lets through requests that only read (GET, HEAD) and those
// carrying "Authorization: Bearer <token>"; the rest (every route that acts
// is a POST) get 401. With no token everything passes.
func requireToken(token string, next http.Handler) http.Handler {
	if token == "" {
		return next
	}
	// Comparing digests keeps the comparison constant-time and also hides
	// the token's length.
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			next.ServeHTTP(w, r)
			return
		}
		got, ok := bearer(r.Header.Get("Authorization"))
		sum := sha256.Sum256([]byte(got))
		if !ok || subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="l4lb admin"`)
			why := " needs the admin token: send Authorization: Bearer <token from [admin] token_file>"
			if ok {
				// A token that is not it: most often an old one, after
				// token_file was rotated.
				why = " needs the admin token, and the one sent is not it: send Authorization: Bearer <the content of [admin] token_file now>"
			}
			writeError(w, http.StatusUnauthorized, r.Method+why)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// bearer extracts the credentials of an "Authorization: Bearer X" header
// (the scheme is case-insensitive, RFC 7235).
func bearer(h string) (string, bool) {
	scheme, cred, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	cred = strings.TrimSpace(cred)
	return cred, cred != ""
}
