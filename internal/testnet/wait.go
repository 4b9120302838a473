package testnet

import "time"

// WaitUntil polls cond every 5 ms until it holds or d has passed; it
// reports whether cond held.
func WaitUntil(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}
