// Package health is l4lb's active health checker: it runs a TCP-connect probe
// against one backend every Interval (jittered, so many backends' checks do
// not align), applies rise/fall hysteresis and reports up/down changes.
//
// Health checks feed health state only, never the breaker. The dial itself
// is injected (Check, or TCPCheck around the proxy's dialer, which counts it
// as kind="health"); a check that reports Inconclusive (local trouble such
// as EMFILE or EADDRNOTAVAIL) counts neither way. A backend starts up, so a
// fresh start is never all-down.
//
//	p, err := health.New("web/10.0.0.1:80", cfg, health.TCPCheck(dial, "10.0.0.1:80", isLocal),
//	        health.Options{OnChange: func(key string, up bool) { ... }})
//	go p.Run(ctx)   // returns when ctx is done; p.Up() is lock-free
package health
