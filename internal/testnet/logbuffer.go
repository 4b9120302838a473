package testnet

import (
	"bytes"
	"strings"
	"sync"
)

// LogBuffer collects what a logger writes (slog.NewTextHandler(buf, nil))
// for a test to read while the code under test goes on writing.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String is everything written so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Count is how many times s occurs in what was written so far.
func (l *LogBuffer) Count(s string) int { return strings.Count(l.String(), s) }
