package config

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

func TestAccessLogKeys(t *testing.T) {
	if l := mustParse(t, validBase).Log; l.Access != "off" || l.AccessFile != "" {
		t.Fatalf("defaults: access %q access_file %q, want off and \"\"", l.Access, l.AccessFile)
	}
	for _, v := range []string{"off", "text", "json"} { // syslog takes no file: syslog_test.go
		cfg := mustParse(t, validBase+"[log]\naccess = "+strconv.Quote(v)+"\naccess_file = \"/var/log/l4lb/access.log\"\n")
		if cfg.Log.Access != v || cfg.Log.AccessFile != "/var/log/l4lb/access.log" {
			t.Errorf("access %q: decoded %+v", v, cfg.Log)
		}
	}
	for _, p := range []problem{
		{"unknown format", validBase + "[log]\naccess = \"yes\" #!\n", "log.access",
			`"yes" is not a setting for the access log; use one of: off, text, json, syslog`},
		{"not a string", validBase + "[log]\naccess = true #!\n", "log.access", "must be a string"},
		{"file not a string", validBase + "[log]\naccess = \"json\"\naccess_file = 1 #!\n", "log.access_file", "must be a string"},
		{"misspelt key", validBase + "[log]\naccess_fle = \"x\" #!\n", "log.access_fle", "access_file"},
	} {
		t.Run(p.name, func(t *testing.T) { wantOneError(t, p, parseErrors(t, p.src)) })
	}
}

// A listener's access_log, TCP or UDP, is on unless it says false.
func TestListenerAccessLogKey(t *testing.T) {
	for _, src := range []string{validBase, validUDP} {
		if l := mustParse(t, src).Listeners[0]; !l.AccessLog {
			t.Errorf("listener %s (%s) left without access_log: off, want on", l.Name, l.Protocol)
		}
	}
	tcp := mustParse(t, listenerWeb+"access_log = false\n"+poolWeb).Listeners[0]
	udp := mustParse(t, withUDPListener("access_log = false\n")).Listeners[0]
	for _, l := range []Listener{tcp, udp} {
		if l.AccessLog {
			t.Errorf("listener %s (%s) with access_log = false: on", l.Name, l.Protocol)
		}
	}
	p := problem{"not a boolean", listenerWeb + "access_log = \"no\" #!\n" + poolWeb, "listener[0].access_log", "must be true or false"}
	wantOneError(t, p, parseErrors(t, p.src))
}

// run must be able to append to the access log: check says so without
// creating anything.
func TestCheckHostAccessFile(t *testing.T) {
	dir := t.TempDir()
	existing := filepath.Join(dir, "existing.log")
	if err := os.WriteFile(existing, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	src := func(access, file string) string {
		return validBase + "[log]\naccess = " + strconv.Quote(access) + "\naccess_file = " + strconv.Quote(file) + " #!\n"
	}
	for _, p := range []problem{
		{"directory missing", src("json", filepath.Join(dir, "missing", "access.log")), "log.access_file",
			"cannot create the access log"},
		{"a directory", src("text", dir), "log.access_file", "is a directory"},
	} {
		t.Run(p.name, func(t *testing.T) { wantOneError(t, p, hostErrors(t, p.src)) })
	}
	for _, ok := range []string{
		src("json", existing),
		src("json", filepath.Join(dir, "new.log")),
		src("off", filepath.Join(dir, "missing", "access.log")), // unused while off
		src("text", ""),                                         // standard error
	} {
		if errs := hostErrors(t, ok); errs != nil {
			t.Errorf("%v", errs)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "new.log")); err == nil {
		t.Error("check created the access log")
	}
}
