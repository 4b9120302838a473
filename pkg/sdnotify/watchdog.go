package sdnotify

import (
	"context"
	"fmt"
	"math"
	"os"
	"strconv"
	"time"
)

// WatchdogInterval is how often to ping systemd's watchdog: half of
// WATCHDOG_USEC, as sd_watchdog_enabled(3) advises. It is 0 when systemd
// expects no pings: WATCHDOG_USEC unset, or WATCHDOG_PID naming another
// process (the variables were inherited, not meant for this one). A
// malformed value is an error.
//
// A process that starts its successor (a binary upgrade) should pass
// WATCHDOG_USEC on without WATCHDOG_PID, which names the parent: the
// successor, once it is the main process (MainPID), must ping too.
func WatchdogInterval() (time.Duration, error) {
	usec := os.Getenv("WATCHDOG_USEC")
	if usec == "" {
		return 0, nil
	}
	if pid := os.Getenv("WATCHDOG_PID"); pid != "" {
		p, err := strconv.Atoi(pid)
		if err != nil || p <= 0 {
			return 0, fmt.Errorf("sd_notify: WATCHDOG_PID=%q is not a process id", pid)
		}
		if p != os.Getpid() {
			return 0, nil
		}
	}
	n, err := strconv.ParseUint(usec, 10, 64)
	if err != nil || n == 0 || n/2 > math.MaxInt64/uint64(time.Microsecond) {
		return 0, fmt.Errorf("sd_notify: WATCHDOG_USEC=%q is not a positive number of microseconds", usec)
	}
	return time.Duration(n/2) * time.Microsecond, nil
}

// RunWatchdog pings WATCHDOG=1 every interval until ctx is done, each time
// only after alive returned nil within that interval (alive gets a context
// that ends then). A failed check withholds the ping, so a process whose
// check keeps failing is restarted by systemd after WatchdogSec, twice the
// interval. Errors, of the check or of the notification, go to report.
func RunWatchdog(ctx context.Context, interval time.Duration, alive func(context.Context) error, report func(error)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		beat, cancel := context.WithTimeout(ctx, interval)
		err := alive(beat)
		cancel()
		if ctx.Err() != nil {
			return // stopping: a check cut short is no failure
		}
		if err == nil {
			err = Watchdog()
		}
		if err != nil {
			report(err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
