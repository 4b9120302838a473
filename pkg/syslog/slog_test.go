package syslog

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/l4lb/l4lb/internal/testnet"
)

// The process log's handler sends each record as one message, its
// severity from its level, its body slog's line without the time.
func TestHandlerSeverityAndBody(t *testing.T) {
	testnet.CheckLeaks(t)
	path := testnet.UnixgramPath(t)
	c := testnet.ListenUnixgram(t, path)
	w := open(t, Config{Address: mustAddress(t, path), Facility: DefaultFacility, MsgID: "process", Hostname: "lb1.example"})

	text := slog.New(NewHandler(w, false, slog.LevelDebug)).With("pool", "web")
	for _, tc := range []struct {
		level slog.Level
		sev   Severity
	}{{slog.LevelDebug, SeverityDebug}, {slog.LevelInfo, SeverityInfo}, {slog.LevelWarn, SeverityWarning}, {slog.LevelError, SeverityError}, {slog.LevelError + 4, SeverityError}} {
		text.Log(t.Context(), tc.level, "backend down", "backend", "10.0.0.1:80")
		m := testnet.MustParseSyslog(t, testnet.ReadDatagram(t, c))
		if m.PRI != 3*8+int(tc.sev) || m.MsgID != "process" || m.Host != "lb1.example" {
			t.Fatalf("%v: PRI %d, MSGID %q: want %d, process", tc.level, m.PRI, m.MsgID, 3*8+int(tc.sev))
		}
		want := "level=" + tc.level.String() + ` msg="backend down" pool=web backend=10.0.0.1:80`
		if m.Body != want {
			t.Fatalf("MSG %q, want %q", m.Body, want)
		}
	}

	js := slog.New(NewHandler(w, true, slog.LevelInfo)).WithGroup("g")
	js.Debug("not logged")
	js.Info("hello", "k", 1)
	m := testnet.MustParseSyslog(t, testnet.ReadDatagram(t, c))
	var body map[string]any
	if err := json.Unmarshal([]byte(m.Body), &body); err != nil || body["msg"] != "hello" || body["time"] != nil {
		t.Fatalf("MSG %q (%v): want JSON with msg hello and no time", m.Body, err)
	}
	if g, _ := body["g"].(map[string]any); g["k"] != 1.0 {
		t.Fatalf("MSG %q: want k in group g", m.Body)
	}
	if strings.Contains(m.Body, "not logged") {
		t.Fatal("a debug record went out at level info")
	}
}
