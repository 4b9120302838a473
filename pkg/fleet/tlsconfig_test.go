package fleet

import (
	"strings"
	"testing"
)

// A client key without its certificate (or a certificate without its key)
// is refused with the key named, not taken as "no TLS".
func TestTLSKeyPairHalfIsRefused(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{RedisURL: "redis://127.0.0.1:6379", TLSKeyFile: "/etc/l4lb/redis.key"}, "tls_key_file"},
		{Config{RedisURL: "rediss://127.0.0.1:6379", TLSKeyFile: "/etc/l4lb/redis.key"}, "tls_key_file"},
		{Config{RedisURL: "redis://127.0.0.1:6379", TLSCertFile: "/etc/l4lb/redis.pem"}, "tls_cert_file"},
	} {
		_, err := tc.cfg.clientOption()
		if err == nil || !strings.Contains(err.Error(), tc.want+" is set without") {
			t.Errorf("%+v: %v; want an error naming %s", tc.cfg, err, tc.want)
		}
	}
}
