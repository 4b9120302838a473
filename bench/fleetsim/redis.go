package fleetsim

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
)

// server is the simulation's one redis-server: no persistence, on a free
// loopback port, in a process group of its own, killed by its pid.
type server struct {
	addr string
	cmd  *exec.Cmd
	dir  string
}

// startServer runs bin on a free 127.0.0.1 port (a few tries: a port free
// a moment ago may be taken before redis-server binds it) and waits, at
// most 10 s, until it answers.
func startServer(bin string) (*server, error) {
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, fmt.Errorf("%s not installed (apt-get install redis-server): %w", bin, err)
	}
	var last error
	for try := 0; try < 5; try++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		s, err := startOn(path, port)
		if err == nil {
			return s, nil
		}
		last = err
	}
	return nil, last
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func startOn(path string, port int) (*server, error) {
	dir, err := os.MkdirTemp("", "fleetsim-redis-")
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "redis.log")
	cmd := exec.Command(path, "--bind", "127.0.0.1", "--port", strconv.Itoa(port),
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--dir", dir,
		"--logfile", logPath, "--loglevel", "warning", "--maxclients", "10000")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s := &server{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cmd: cmd, dir: dir}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case err := <-exited:
			log, _ := os.ReadFile(logPath)
			os.RemoveAll(dir)
			return nil, fmt.Errorf("redis-server on port %d exited: %v: %s", port, err, strings.TrimSpace(string(log)))
		default:
		}
		if _, err := s.info("server"); err == nil {
			go func() { <-exited }() // reaped when stop kills it
			return s, nil
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("redis-server on port %d does not answer after 10 s", port)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop kills the server by its pid and removes its directory.
func (s *server) stop() {
	_ = s.cmd.Process.Kill()
	os.RemoveAll(s.dir)
}

// info is one INFO section as key: value, over a connection of its own.
// The INFO itself counts as one command (and in commandstats as one
// "info" call).
func (s *server) info(section string) (map[string]string, error) {
	// A loaded machine can keep the answer seconds away: a few tries.
	var err error
	for try := 0; try < 3; try++ {
		var out map[string]string
		if out, err = s.infoOnce(section); err == nil {
			return out, nil
		}
	}
	return nil, err
}

func (s *server) infoOnce(section string) (map[string]string, error) {
	c, err := net.DialTimeout("tcp", s.addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return testnet.RedisInfo(c, section)
}

// sample is what the server had done at one moment.
type sample struct {
	at       time.Time
	commands float64            // total_commands_processed
	calls    map[string]float64 // commandstats: calls by command
	cpu      float64            // user + system CPU seconds (/proc/PID/stat)
}

// sample reads the server's counters. Each sample's own INFO calls are
// counted by the server (two commands: stats and commandstats); diff
// takes them out.
func (s *server) sample() (sample, error) {
	st, err := s.info("stats")
	if err != nil {
		return sample{}, err
	}
	cs, err := s.info("commandstats")
	if err != nil {
		return sample{}, err
	}
	total, err := strconv.ParseFloat(st["total_commands_processed"], 64)
	if err != nil {
		return sample{}, fmt.Errorf("INFO stats: total_commands_processed %q: %w", st["total_commands_processed"], err)
	}
	calls := map[string]float64{}
	for k, v := range cs {
		name, ok := strings.CutPrefix(k, "cmdstat_")
		if !ok {
			continue
		}
		for f := range strings.SplitSeq(v, ",") {
			if n, ok := strings.CutPrefix(f, "calls="); ok {
				calls[name], _ = strconv.ParseFloat(n, 64)
			}
		}
	}
	cpu, err := cpuSeconds(s.cmd.Process.Pid)
	if err != nil {
		return sample{}, err
	}
	return sample{at: time.Now(), commands: total, calls: calls, cpu: cpu}, nil
}

// window is what the server did between two samples, less the samples'
// own INFO commands.
type window struct {
	seconds  float64
	commands float64
	calls    map[string]float64
	cpu      float64
}

// infoPerSample is the INFO commands one sample makes (stats and
// commandstats); the later sample's stats INFO is counted before it
// answers, the commandstats one after.
const infoPerSample = 2

func diff(a, b sample) window {
	w := window{seconds: b.at.Sub(a.at).Seconds(), commands: b.commands - a.commands - infoPerSample, cpu: b.cpu - a.cpu, calls: map[string]float64{}}
	for k, v := range b.calls {
		if d := v - a.calls[k]; d > 0 {
			w.calls[k] = d
		}
	}
	w.calls["info"] -= infoPerSample
	if w.calls["info"] <= 0 {
		delete(w.calls, "info")
	}
	return w
}

// clockTicks is USER_HZ, which /proc/PID/stat counts in: 100 on every
// Linux architecture Go supports.
const clockTicks = 100

// cpuSeconds is a process's user + system CPU from /proc/PID/stat.
func cpuSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces: fields count from the
	// last ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, errors.New("/proc/PID/stat: no ')'")
	}
	f := strings.Fields(string(b)[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the name", pid, len(f))
	}
	// utime and stime are fields 14 and 15: 12 and 13 after the name.
	u, err1 := strconv.ParseFloat(f[11], 64)
	s, err2 := strconv.ParseFloat(f[12], 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return (u + s) / clockTicks, nil
}
