//go:build race

package e2e

// raceEnabled: the tests run with the race detector, and so does the l4lb
// they build.
const raceEnabled = true
