package admin

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// fakeFleetMembership is a fakeMembership whose pools a fleet shares.
type fakeFleetMembership struct {
	fakeMembership
	replaceErr error
	replaced   []string
}

func (f *fakeFleetMembership) ReplaceUnreadable(_ context.Context, pool string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.replaceErr != nil {
		return fmt.Errorf("pool %q: %w", pool, f.replaceErr)
	}
	f.replaced = append(f.replaced, pool)
	return nil
}

// An unreadable fleet record answers 502, which a client does not retry
// blindly (a 409 it would, forever), and the replace route is the way out.
func TestUnreadableFleetRecordAndItsReplacement(t *testing.T) {
	m := &fakeFleetMembership{fakeMembership: fakeMembership{err: map[string]error{
		"127.0.0.1:9012": fmt.Errorf("the record is bad: %w", ErrUnreadable),
	}}}
	srv, _ := newMembershipServer(t, m, "")
	replace := srv.URL + "/api/v1/pools/web/fleet-members/replace"
	for _, tc := range []struct {
		name, method, url, body string
		code                    int
		msg                     string
	}{
		{"an add on an unreadable record", "POST", srv.URL + "/api/v1/pools/web/backends", `{"addr":"127.0.0.1:9012"}`, 502, "add failed: pool \"web\" backend 127.0.0.1:9012: the record is bad"},
		{"a remove on an unreadable record", "DELETE", srv.URL + "/api/v1/pools/web/backends/127.0.0.1:9012", "", 502, "remove failed:"},
		{"a replace by GET", "GET", replace, "", 405, "use POST"},
		{"a replace with a parameter", "POST", replace + "?force=1", "", 400, `no query parameter, not "force=1"`},
		{"a replace of an unknown pool", "POST", srv.URL + "/api/v1/pools/nope/fleet-members/replace", "", 404, `unknown pool "nope"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, v := send(t, tc.method, tc.url, tc.body, nil)
			if code != tc.code || !strings.Contains(fmt.Sprint(v["error"]), tc.msg) {
				t.Fatalf("%d %v, want %d with %q", code, v, tc.code, tc.msg)
			}
		})
	}
	if len(m.replaced) != 0 {
		t.Fatalf("refused requests reached the membership: %v", m.replaced)
	}
	if code, v := send(t, "POST", replace, "", nil); code != 200 || v["name"] != "web" {
		t.Fatalf("replace: %d %v, want 200 with the pool", code, v)
	}
	if fmt.Sprint(m.replaced) != "[web]" {
		t.Fatalf("replaced %v", m.replaced)
	}
	m.replaceErr = ErrNothingToReplace
	if code, v := send(t, "POST", replace, "", nil); code != 409 || !strings.Contains(fmt.Sprint(v["error"]), "replace refused: pool \"web\": nothing to replace") {
		t.Fatalf("replace of a readable record: %d %v, want 409", code, v)
	}

	plain, _ := newMembershipServer(t, &fakeMembership{}, "")
	if code, v := send(t, "POST", plain.URL+"/api/v1/pools/web/fleet-members/replace", "", nil); code != 501 || !strings.Contains(fmt.Sprint(v["error"]), "no backends with a fleet") {
		t.Fatalf("replace without a fleet: %d %v, want 501", code, v)
	}
}
