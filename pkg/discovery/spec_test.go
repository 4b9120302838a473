package discovery

import (
	"strings"
	"testing"
	"time"
)

func TestNewWatcherRejectsUnusableSpecs(t *testing.T) {
	for _, c := range []struct {
		spec Spec
		want string
	}{
		{Spec{}, "neither dns nor srv"},
		{Spec{DNS: "web.test:80", SRV: "_web._tcp.test"}, "both set"},
		{Spec{DNS: "web.test"}, "want name:port"},
		{Spec{DNS: "web.test:0"}, "not 1-65535"},
		{Spec{DNS: "web.test:http"}, "not 1-65535"},
		{Spec{DNS: "10.0.0.1:80"}, "an address, not a name"},
		{Spec{DNS: "[::1]:80"}, "an address, not a name"},
		{Spec{DNS: "bad..name:80"}, "not a domain name"},
		{Spec{SRV: "."}, "not a domain name"},
		{Spec{DNS: "web.test:80", Family: "ipv5"}, "family"},
		{Spec{DNS: "web.test:80", Resolvers: []string{"127.0.0.1"}}, "want ip:port"},
		{Spec{DNS: "web.test:80", MinRefresh: time.Minute, MaxRefresh: time.Second}, "below min_refresh"},
		{Spec{DNS: "web.test:80", EmptyGrace: -time.Second}, "negative"},
	} {
		_, err := NewWatcher(c.spec, Options{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one saying %q", c.spec, err, c.want)
		}
	}
}

func TestSpecDefaults(t *testing.T) {
	p, err := compile(Spec{SRV: "_web._tcp.svc.test"})
	if err != nil {
		t.Fatal(err)
	}
	s := p.spec
	if s.MinRefresh != DefaultMinRefresh || s.MaxRefresh != DefaultMaxRefresh || s.Timeout != DefaultTimeout ||
		s.ResolvConf != DefaultResolvConf || s.EmptyGrace != 0 || !p.family.v4 || !p.family.v6 || p.name != "_web._tcp.svc.test." {
		t.Fatalf("defaults: %+v", p)
	}
	// A MinRefresh above the default maximum raises the maximum with it.
	if p, err = compile(Spec{DNS: "web.test:80", MinRefresh: time.Hour}); err != nil || p.spec.MaxRefresh != time.Hour {
		t.Fatalf("MinRefresh 1h: %+v, %v", p.spec, err)
	}
}
