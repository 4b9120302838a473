package handoff

import (
	"os"
	"slices"
	"strconv"
	"strings"
)

// The environment an upgrading l4lb starts its successor with; the
// package comment gives each one's format.
const (
	EnvParent      = "L4LB_UPGRADE_PARENT"
	EnvState       = "L4LB_UPGRADE_STATE"
	EnvReady       = "L4LB_UPGRADE_READY"
	EnvSockets     = "L4LB_UPGRADE_SOCKETS"
	EnvBreakerFeed = "L4LB_UPGRADE_BREAKER_FEED"
	EnvFlows       = "L4LB_UPGRADE_FLOWS"
)

// systemd's socket activation (sd_listen_fds(3)).
const (
	envListenPID     = "LISTEN_PID"
	envListenFDs     = "LISTEN_FDS"
	envListenFDNames = "LISTEN_FDNAMES"
	// listenFDsStart is the first fd systemd passes (SD_LISTEN_FDS_START),
	// and the lowest fd either way of inheriting takes.
	listenFDsStart = 3
)

// inheritedVars are the variables that name what a process inherits: a
// process clears them at start, and passes none of its own to a
// successor.
var inheritedVars = []string{EnvParent, EnvState, EnvReady, EnvSockets, EnvBreakerFeed, EnvFlows,
	envListenPID, envListenFDs, envListenFDNames}

// The fds of a successor, as the old process numbers them.
const (
	stateFD       = 3
	readyFD       = 4
	firstSocketFD = 5
)

// successorEnv is the environment of a successor: the upgrade's variables
// (feedFD < 0: no feed; flowsFD < 0: no flows socket), then this process's environment without the
// variables that name what it inherited, nor WATCHDOG_PID, which names it
// (the successor pings systemd once it is the main process).
func successorEnv(sockets, feedFD, flowsFD int) []string {
	env := []string{
		EnvParent + "=" + strconv.Itoa(os.Getpid()),
		EnvState + "=" + strconv.Itoa(stateFD),
		EnvReady + "=" + strconv.Itoa(readyFD),
		EnvSockets + "=" + strconv.Itoa(firstSocketFD) + ":" + strconv.Itoa(sockets),
	}
	if feedFD >= 0 {
		env = append(env, EnvBreakerFeed+"="+strconv.Itoa(feedFD)+":"+strconv.Itoa(os.Getpid()))
	}
	if flowsFD >= 0 {
		env = append(env, EnvFlows+"="+strconv.Itoa(flowsFD)+":"+strconv.Itoa(os.Getpid()))
	}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "WATCHDOG_PID" || slices.Contains(inheritedVars, k) {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// envFD reads the fd in the variable key.
func envFD(key string) (int, bool) {
	v := os.Getenv(key)
	if v == "" {
		return -1, false
	}
	fd, err := strconv.Atoi(v)
	if err != nil || fd < listenFDsStart {
		return -1, false
	}
	return fd, true
}

// socketFDs reads EnvSockets' "FIRST:COUNT"; nil when it is malformed.
func socketFDs(v string) []int {
	first, count, ok := strings.Cut(v, ":")
	if !ok {
		return nil
	}
	f, err1 := strconv.Atoi(first)
	n, err2 := strconv.Atoi(count)
	if err1 != nil || err2 != nil || f < listenFDsStart || n < 0 {
		return nil
	}
	fds := make([]int, n)
	for i := range fds {
		fds[i] = f + i
	}
	return fds
}

// parentFD reads an "FD:PID" variable (EnvBreakerFeed, EnvFlows): the fd,
// if the process that set it is parent.
func parentFD(v string, parent int) (int, bool) {
	fdText, pidText, ok := strings.Cut(v, ":")
	if !ok {
		return -1, false
	}
	fd, err1 := strconv.Atoi(fdText)
	pid, err2 := strconv.Atoi(pidText)
	if err1 != nil || err2 != nil || fd < listenFDsStart || pid != parent {
		return -1, false
	}
	return fd, true
}
