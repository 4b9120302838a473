package handoff

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/breaker"
	"github.com/l4lb/l4lb/pkg/listener"
	"github.com/l4lb/l4lb/pkg/pool"
)

// An upgrade needs a second process: Attempt starts the test binary
// itself (the path this process was started from, as it starts l4lb),
// and TestMain makes that process the successor of these tests,
// following the contract from its side with nothing but this package.

// successorEnv names what the successor does, and where it reports.
const (
	envSuccessorMode   = "HANDOFF_TEST_SUCCESSOR"
	envSuccessorReport = "HANDOFF_TEST_REPORT"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(envSuccessorMode); mode != "" && os.Getenv(EnvParent) != "" {
		os.Exit(successor(mode, os.Getenv(envSuccessorReport)))
	}
	os.Exit(m.Run())
}

// report is what the successor took over, as it writes it for the test.
type report struct {
	PID      int      `json:"pid"`
	From     string   `json:"from"`
	Parent   int      `json:"parent"`
	Version  string   `json:"version"`
	Sockets  int      `json:"sockets"`
	Breaker  []string `json:"breaker"` // key=generation/open, after the feed ended
	Followed int      `json:"followed"`
	Env      []string `json:"env"` // the inheritance's variables as it started
}

// successor is the new process of the tests below. "ready": take over,
// say so, follow the feed until the old process closes it, report.
// "exit": exit before it is ready. "hang": never say anything.
func successor(mode, reportPath string) int {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	switch mode {
	case "exit":
		return 3
	case "hang":
		time.Sleep(time.Hour)
		return 0
	}
	rep := report{PID: os.Getpid()}
	for _, k := range inheritedVars {
		if v, ok := os.LookupEnv(k); ok {
			rep.Env = append(rep.Env, k+"="+v)
		}
	}
	inh := Take(log)
	rep.From, rep.Parent = inh.From, inh.Parent
	if inh.State != nil {
		rep.Version = inh.State.FromVersion
	}
	for _, s := range inh.Sockets.Rest() {
		rep.Sockets++
		unix.Close(s.FD)
	}
	store := breaker.NewMemoryStore(nil)
	follower := inh.restoreStore(store, log)
	// The pid file beside the report is the old process's.
	NewUpgrader(filepath.Join(filepath.Dir(reportPath), "pid"), 0, "successor", log).Started(inh)
	if follower != nil {
		<-follower.done
		rep.Followed = follower.followed
	}
	for _, e := range store.Snapshot().Entries {
		rep.Breaker = append(rep.Breaker, fmt.Sprintf("%s=%d/%v", e.Key, e.Generation, e.Open))
	}
	data, _ := json.Marshal(rep)
	if err := os.WriteFile(reportPath, data, 0o644); err != nil {
		return 1
	}
	return 0
}

// upgradeCase is one attempt's setup: a listening socket and a store to
// hand over, and the refusals and commit of the window recorded.
type upgradeCase struct {
	t       *testing.T
	store   *breaker.MemoryStore
	socks   *listener.Sockets
	pidfile string
	report  string
	logs    *testnet.LogBuffer

	mu               sync.Mutex
	opened, closed   int // refusals made, and allowed again
	committed        int
	closedBeforePIDs bool // allowed again before the pid file was rewritten
}

func newUpgradeCase(t *testing.T, mode string) *upgradeCase {
	testnet.CheckLeaks(t)
	dir := t.TempDir()
	c := &upgradeCase{t: t, store: breaker.NewMemoryStore(nil), pidfile: filepath.Join(dir, "pid"),
		report: filepath.Join(dir, "report.json"), logs: &testnet.LogBuffer{}}
	t.Setenv(envSuccessorMode, mode)
	t.Setenv(envSuccessorReport, c.report)
	// A variable of an inheritance of this process's own is not passed on.
	t.Setenv("LISTEN_FDS", "9")
	socks, err := listener.Bind("l", "127.0.0.1:0", 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { socks.Close() })
	c.socks = socks
	if err := WritePIDFile(c.pidfile, os.Getpid()); err != nil {
		t.Fatal(err)
	}
	c.store.Restore(breaker.MemorySnapshot{Entries: []breaker.SnapshotEntry{{Key: "p/a", Generation: 2}}})
	return c
}

func (c *upgradeCase) upgrader(timeout time.Duration) *Upgrader {
	return NewUpgrader(c.pidfile, timeout, "v-old", slog.New(slog.NewTextHandler(c.logs, nil)))
}

// RefuseReloads and RefuseActions make the case the attempt's Refuser.
func (c *upgradeCase) RefuseReloads(why string) func() { return c.refuse(why) }
func (c *upgradeCase) RefuseActions(why string) func() { return c.refuse(why) }

func (c *upgradeCase) refuse(why string) func() {
	before, _ := os.Stat(c.pidfile)
	c.mu.Lock()
	defer c.mu.Unlock()
	if strings.HasPrefix(why, "a binary upgrade is under way") {
		c.opened++
	}
	return func() {
		now, _ := os.Stat(c.pidfile)
		c.mu.Lock()
		defer c.mu.Unlock()
		c.closed++
		c.closedBeforePIDs = os.SameFile(before, now)
	}
}

func (c *upgradeCase) window() Window {
	return Window{
		Refuse: c,
		Offer: func() (Offer, error) {
			fd, err := unix.Dup(c.socks.FDs[0])
			if err != nil {
				return Offer{}, err
			}
			return Offer{Sockets: []int{fd}, Store: c.store, Pools: func() []*pool.Pool { return nil }}, nil
		},
		Commit: func() {
			c.mu.Lock()
			c.committed++
			c.mu.Unlock()
		},
	}
}

// The whole upgrade between two processes: the successor gets the
// sockets, the state document and the feed at the fds and in the
// variables the contract names (and no variable of an inheritance of the
// old process's own), says it is ready, follows a trip the old process
// makes after the hand-over, and ends its feed when the old one exits.
func TestUpgradeHandsOverToASuccessor(t *testing.T) {
	c := newUpgradeCase(t, "ready")
	up := c.upgrader(30 * time.Second)
	ok, stop := up.Attempt(c.window(), make(chan os.Signal))
	if !ok || stop != nil {
		t.Fatalf("attempt: ok %v, stop %v; want handed over\n%s", ok, stop, c.logs)
	}
	if c.opened != 2 || c.closed != 0 || c.committed != 1 {
		t.Fatalf("refused %d, allowed again %d, committed %d; want 2 (reloads and actions), 0, 1", c.opened, c.closed, c.committed)
	}
	// After the hand-over the old process still serves its drain: its
	// trips reach the successor.
	c.store.Trip(context.Background(), "p/a", 2, time.Minute, time.Minute)
	up.Exiting()
	var rep report
	testnet.Eventually(t, "the successor's report", func() bool {
		data, err := os.ReadFile(c.report)
		return err == nil && json.Unmarshal(data, &rep) == nil
	})
	pid := os.Getpid()
	want := report{PID: rep.PID, From: "upgrade", Parent: pid, Version: "v-old", Sockets: 1, Breaker: []string{"p/a=3/true"}, Followed: 1,
		Env: []string{fmt.Sprintf("L4LB_UPGRADE_PARENT=%d", pid), "L4LB_UPGRADE_STATE=3", "L4LB_UPGRADE_READY=4",
			"L4LB_UPGRADE_SOCKETS=5:1", fmt.Sprintf("L4LB_UPGRADE_BREAKER_FEED=6:%d", pid), fmt.Sprintf("L4LB_UPGRADE_FLOWS=7:%d", pid)}}
	if fmt.Sprint(rep) != fmt.Sprint(want) {
		t.Fatalf("the successor took %+v, want %+v", rep, want)
	}
	// The successor took the pid file; the old process's exit leaves it.
	if pid, err := ReadPIDFile(c.pidfile); err != nil || pid != rep.PID {
		t.Fatalf("pid file after the hand-over: %d %v, want the successor's %d", pid, err, rep.PID)
	}
}

// A successor that fails (exits before it is ready, or is not ready in
// time, when it is killed) leaves this process serving: reloads and
// actions are allowed again before the pid file is rewritten with this process's pid, which is how
// l4lb upgrade learns the outcome; a stop signal during the wait ends the
// attempt and is returned.
func TestUpgradeFailuresKeepThisProcessServing(t *testing.T) {
	for _, tc := range []struct {
		name, mode string
		timeout    time.Duration
		signal     os.Signal
		log        string
	}{
		{"exits", "exit", 30 * time.Second, nil, "the new process exited before it was ready"},
		{"too slow", "hang", 500 * time.Millisecond, nil, "was not ready in time (killed)"},
		{"stop signal", "hang", 30 * time.Second, syscall.SIGTERM, "a stop signal came first"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newUpgradeCase(t, tc.mode)
			sigs := make(chan os.Signal, 2)
			if tc.signal != nil {
				sigs <- syscall.SIGUSR2 // ignored: one is under way
				sigs <- tc.signal
			}
			ok, stop := c.upgrader(tc.timeout).Attempt(c.window(), sigs)
			if ok || stop != tc.signal {
				t.Fatalf("attempt: ok %v, stop %v; want failed, stop %v", ok, stop, tc.signal)
			}
			if c.opened != 2 || c.closed != 2 || c.committed != 0 || !c.closedBeforePIDs {
				t.Fatalf("refused %d, allowed again %d (before the pid file: %v), committed %d; want 2, 2 (true), 0",
					c.opened, c.closed, c.closedBeforePIDs, c.committed)
			}
			if pid, err := ReadPIDFile(c.pidfile); err != nil || pid != os.Getpid() {
				t.Fatalf("pid file after a failed attempt: %d %v, want this process", pid, err)
			}
			if !strings.Contains(c.logs.String(), tc.log) {
				t.Fatalf("the log does not say %q:\n%s", tc.log, c.logs)
			}
		})
	}
}
