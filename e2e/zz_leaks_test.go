package e2e

import (
	"testing"

	"github.com/l4lb/l4lb/internal/testnet"
)

// A leak check over the whole package, beside the per-test checks that
// testnet.StartBackend and testnet.FrozenBackend begin: it also covers the
// tests that start l4lb without a backend of the test's own. Goroutines
// and fds are the test process's own: a child's are its kernel's business
// once it has exited.
//
// The file's name makes TestZZNoLeaksAfterAllTests the last sequential
// test: go test runs a package's tests in the order of its files, then of
// their declarations. (Parallel tests run after it and are not covered;
// this package has none.)

// beforeTests is taken while the package initialises, before TestMain and
// any test.
var beforeTests = testnet.TakeSnapshot()

func TestZZNoLeaksAfterAllTests(t *testing.T) {
	beforeTests.Check(t)
}
