package discovery

import (
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
)

// A watcher stopped while a query waits on a silent resolver returns
// without waiting the query's timeout out, and leaves no goroutine or
// socket behind (the leak check).
func TestRunStopsInTheMiddleOfAQuery(t *testing.T) {
	testnet.CheckLeaks(t)
	srv := startDNSServer(t)
	srv.setMode(silent)
	sp := spec("web.test", srv)
	sp.Timeout = time.Hour
	w, err := NewWatcher(sp, Options{Pool: "web", OnChange: func(s Set) { t.Errorf("reported %v from a lookup never answered", s) }})
	if err != nil {
		t.Fatal(err)
	}
	stop := goRun(t, w)
	if !testnet.WaitUntil(patience, func() bool { return srv.count("udp", "", "web.test") > 0 }) {
		t.Fatal("the watcher never asked")
	}
	if !stop() {
		t.Fatalf("Run still waits %v after its context ended, on a query of timeout 1h", patience)
	}
	if st := w.Status(); st.Failing || !st.LastSuccess.IsZero() {
		t.Fatalf("a lookup cut short by the stop counted: %+v", st)
	}
}
