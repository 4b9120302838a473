package main

import (
	"testing"

	"github.com/l4lb/l4lb/internal/testnet"
)

// A leak check over the whole package, beside the per-test ones: it also
// covers the tests that run an instance in this process without a backend
// of the test's own. The file's name makes it the last sequential test
// (go test runs a package's tests in the order of its files).

// beforeTests is taken while the package initialises, before any test.
var beforeTests = testnet.TakeSnapshot()

func TestZZNoLeaksAfterAllTests(t *testing.T) {
	beforeTests.Check(t)
}
