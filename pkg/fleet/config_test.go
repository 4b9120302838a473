package fleet

import (
	"strings"
	"testing"
	"time"
)

// Config has no defaults: New names every setting left out.
func TestNewRefusesAnIncompleteConfig(t *testing.T) {
	_, err := New(Config{RedisURL: "redis://127.0.0.1:6379"}, Options{})
	for _, want := range []string{"key_prefix is empty", "sync_interval 0s", "timeout 0s"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New error %v does not say %q", err, want)
		}
	}
	if _, err := New(Config{RedisURL: "redis://127.0.0.1:6379", KeyPrefix: testPrefix, SyncInterval: time.Hour, Timeout: -time.Second}, Options{}); err == nil {
		t.Error("New took a negative timeout")
	}
}
