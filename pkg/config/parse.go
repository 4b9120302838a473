package config

import (
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/BurntSushi/toml"
)

// Load reads the file at path and parses it (see Parse).
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return Parse(path, data)
}

// Parse decodes TOML data, fills in defaults and validates the result.
// filename is only used in error messages. On any problem it returns a nil
// Config and an Errors holding every problem found, sorted by line.
func Parse(filename string, data []byte) (*Config, error) {
	var raw map[string]any
	if _, err := toml.Decode(string(data), &raw); err != nil {
		return nil, syntaxError(filename, err)
	}
	c := &collector{file: filename, pos: locate(data)}
	cfg := decode(c, raw)
	crossCheck(c, cfg)
	if len(c.errs) > 0 {
		c.errs.sort()
		return nil, c.errs
	}
	cfg.file, cfg.pos = filename, c.pos
	return cfg, nil
}

// syntaxError turns a TOML parse failure into Errors. Nothing else can be
// checked in a file that does not parse, so it is the only problem reported.
func syntaxError(filename string, err error) error {
	var pe toml.ParseError
	if errors.As(err, &pe) {
		return Errors{{
			File: filename,
			Line: pe.Position.Line,
			Msg:  fmt.Sprintf("TOML syntax error at column %d: %s", pe.Position.Col, pe.Message),
		}}
	}
	return Errors{{File: filename, Msg: "TOML syntax error: " + err.Error()}}
}

// decode walks the decoded document into a Config, starting from defaults
// and checking every value that can be checked on its own. Checks that
// compare tables with each other are in crossCheck.
func decode(c *collector, raw map[string]any) *Config {
	cfg := &Config{
		Global:  DefaultGlobal(),
		Admin:   DefaultAdmin(),
		Log:     DefaultLog(),
		Cluster: DefaultCluster(),
		Pools:   map[string]*Pool{},
	}
	root := newTable(c, "", "", raw)
	if t := root.sub("global"); t != nil {
		decodeGlobal(t, &cfg.Global)
	}
	if t := root.sub("admin"); t != nil {
		decodeAdmin(t, &cfg.Admin)
	}
	if t := root.sub("log"); t != nil {
		t.oneOf("level", &cfg.Log.Level, "log level")
		t.oneOf("format", &cfg.Log.Format, "log format")
		t.oneOf("access", &cfg.Log.Access, "setting for the access log")
		t.str("access_file", &cfg.Log.AccessFile)
		decodeSyslog(t, &cfg.Log)
		t.durationIn("access_interval", &cfg.Log.AccessInterval)
		t.boolean("access_on_connect", &cfg.Log.AccessOnConnect)
		t.done()
	}
	if t := root.sub("cluster"); t != nil {
		decodeCluster(t, &cfg.Cluster)
	}
	for _, t := range root.tables("listener") {
		cfg.Listeners = append(cfg.Listeners, decodeListener(t))
	}
	if v, ok := raw["listener"]; !ok || isEmptyArray(v) {
		c.add("listener", "no [[listener]]: nothing to serve")
	}
	if t := root.sub("pool"); t != nil {
		decodePools(t, cfg, poolUses(cfg.Listeners))
	}
	root.done()
	return cfg
}

func isEmptyArray(v any) bool {
	switch x := v.(type) {
	case []any:
		return len(x) == 0
	case []map[string]any:
		return len(x) == 0
	}
	return false
}

func decodeGlobal(t *table, g *Global) {
	t.durationIn("shutdown_timeout", &g.ShutdownTimeout)
	t.durationIn("upgrade_drain_timeout", &g.UpgradeDrainTimeout)
	t.integer("max_connections", &g.MaxConnections)
	// accept_loops named the same number when each listener had its own
	// accept loops; it stays accepted so existing files keep working.
	if _, ok := t.get("event_loops"); ok {
		t.integer("event_loops", &g.EventLoops)
		if _, old := t.get("accept_loops"); old {
			t.c.add(t.keyOf("accept_loops"), "set beside event_loops: accept_loops is the older name of event_loops; keep one")
		}
	} else {
		t.integer("accept_loops", &g.EventLoops)
	}
	t.integer("pipe_size", &g.PipeSize)
	t.durationIn("busy_poll", &g.BusyPoll)
	t.durationIn("wake_coalesce", &g.WakeCoalesce)
	if t.str("state_file", &g.StateFile) {
		checkStateFileName(t.c, t.keyOf("state_file"), g.StateFile)
	}
	t.done()
}

func decodeAdmin(t *table, a *Admin) {
	if t.str("listen", &a.Listen) && a.Listen != "" {
		if _, err := parseAddr(a.Listen, roleListen); err != nil {
			t.c.add(t.keyOf("listen"), "%v (or \"\" to turn the admin endpoint off)", err)
		}
	}
	t.str("token_file", &a.TokenFile)
	t.integer("max_connections", &a.MaxConnections)
	t.done()
}

func decodeListener(t *table) Listener {
	l := DefaultListener()
	l.Line = t.c.pos.line(t.key)
	t.require("name", "every [[listener]] needs a unique name")
	t.require("bind", "the IP:port to listen on, e.g. \"127.0.0.1:8080\"")
	t.require("pool", "the name of the [pool.NAME] to send connections to")
	if t.str("name", &l.Name) {
		checkName(t.c, t.keyOf("name"), l.Name)
	}
	if t.str("bind", &l.Bind) {
		if _, err := parseAddr(l.Bind, roleListen); err != nil {
			t.c.add(t.keyOf("bind"), "%v", err)
		}
	}
	// The keys of one protocol are refused on a listener of the other only
	// when the protocol is known: a bad protocol is reported once, alone.
	_, protoWritten := t.m["protocol"]
	protoKnown := !protoWritten
	if t.str("protocol", &l.Protocol) {
		if slices.Contains(Protocols(), l.Protocol) {
			protoKnown = true
		} else {
			t.c.add(t.keyOf("protocol"), "unknown protocol %q; use \"tcp\" or \"udp\"", l.Protocol)
		}
	}
	if t.str("pool", &l.Pool) && l.Pool == "" {
		t.c.add(t.keyOf("pool"), "must not be empty: name the [pool.NAME] to send connections to")
	}
	tcp := !protoKnown || l.Protocol == ProtocolTCP
	udp := !protoKnown || l.Protocol == ProtocolUDP
	if !t.misplaced("backlog", tcp, "only for protocol = \"tcp\" listeners: a UDP socket has no listen backlog") {
		t.integer("backlog", &l.Backlog)
	}
	notUDP := "only for protocol = \"udp\" listeners, and this listener is tcp"
	if !protoWritten {
		notUDP += " (protocol left out means \"tcp\")"
	}
	if !t.misplaced("session_timeout", udp, "%s", notUDP) {
		t.durationIn("session_timeout", &l.SessionTimeout)
	}
	if !t.misplaced("max_sessions", udp, "%s", notUDP) {
		t.integer("max_sessions", &l.MaxSessions)
	}
	if !t.misplaced("responses", udp, "%s", notUDP) {
		t.integer("responses", &l.Responses)
	}
	if !t.misplaced("reuse_sockets", udp, "%s", notUDP) {
		t.boolean("reuse_sockets", &l.ReuseSockets)
	}
	if !t.misplaced("requests", udp, "%s", notUDP) {
		t.integer("requests", &l.Requests)
	}
	t.boolean("access_log", &l.AccessLog)
	decodeReceiveBuffer(t, &l, udp, notUDP)
	decodeListenerPolicy(t, &l, tcp)
	decodeRoutes(t, &l, tcp)
	t.done()
	return l
}

// decodePools reads every [pool.NAME] in name order, so the messages come
// out in the same order on every run. uses says which protocol each pool
// serves, from the listeners naming it.
func decodePools(t *table, cfg *Config, uses map[string]poolUse) {
	for _, name := range sortedKeys(t.m) {
		pt := t.sub(name)
		if pt == nil {
			continue
		}
		checkName(t.c, pt.key, name)
		cfg.Pools[name] = decodePool(pt, name, useOf(uses, name))
		cfg.PoolNames = append(cfg.PoolNames, name)
	}
	t.done()
}

func decodePool(t *table, name string, use poolUse) *Pool {
	p := DefaultPool(name)
	p.Line = t.c.pos.line(t.key)
	if use.protocol != "" {
		p.Protocol = use.protocol
	}
	t.oneOf("algorithm", &p.Algorithm, "load-balancing algorithm")
	t.oneOf("hash_key", &p.HashKey, "hash key")
	tcp, udp := use.protocol != ProtocolUDP, use.protocol != ProtocolTCP
	timeoutOK := true
	if !t.misplaced("connect_timeout", tcp, "%s", use.notFor("connect_timeout", "a UDP session's first datagram waits reply_timeout for its reply instead")) {
		timeoutOK = t.durationIn("connect_timeout", &p.ConnectTimeout)
	}
	if !t.misplaced("connect_budget", tcp, "%s", use.notFor("connect_budget", "a UDP session's first datagram waits reply_timeout for its reply instead")) {
		if _, set := t.get("connect_budget"); !set && timeoutOK {
			p.ConnectBudget = max(p.ConnectBudget, p.ConnectTimeout)
		}
		if t.durationIn("connect_budget", &p.ConnectBudget) && timeoutOK && p.ConnectBudget < p.ConnectTimeout {
			t.c.add(t.keyOf("connect_budget"), "connect_budget %v is shorter than connect_timeout %v: not even the first dial could take its full time; raise connect_budget or lower connect_timeout", p.ConnectBudget, p.ConnectTimeout)
		}
	}
	if !t.misplaced("idle_timeout", tcp, "%s", use.notFor("idle_timeout", "UDP sessions end after the listener's session_timeout")) {
		t.durationIn("idle_timeout", &p.IdleTimeout)
	}
	if !t.misplaced("reply_timeout", udp, "%s", use.notFor("reply_timeout", "a TCP dial is judged at its connect (connect_timeout)")) {
		t.durationIn("reply_timeout", &p.ReplyTimeout)
	}
	t.integer("retries", &p.Retries)
	t.durationIn("slow_start", &p.SlowStart)
	if t.number("hash_balance_factor", &p.HashBalanceFactor) {
		if f := p.HashBalanceFactor; f != 0 && f <= 1 {
			t.c.add(t.keyOf("hash_balance_factor"), "%v: must be 0 (off) or greater than 1.0 (no backend takes more than factor x the average load)", f)
		}
	}
	vnodesOK := t.integer("ring_vnodes", &p.RingVnodes)
	maglevOK := t.integer("maglev_table_size", &p.MaglevTableSize)
	decodePoolPolicy(t, p, use)
	var backendKeys []string
	for _, bt := range t.tables("backend") {
		p.Backends = append(p.Backends, decodeBackend(bt))
		backendKeys = append(backendKeys, bt.key)
	}
	if dt := t.sub("discovery"); dt != nil {
		p.Discovery = decodeDiscovery(dt)
		if p.Discovery.Backup && !slices.ContainsFunc(p.Backends, func(b Backend) bool { return !b.Backup }) {
			t.c.add(dt.keyOf("backup"), "the discovered backends are backups, and the pool has no primary [[%s]] for them to stand in for", t.keyOf("backend"))
		}
	}
	if v, ok := t.m["backend"]; (!ok || isEmptyArray(v)) && p.Discovery == nil && !t.written("discovery") {
		t.c.add(t.keyOf("backend"), "pool %q has no backends: add at least one [[%s]] with an addr, or find them in DNS with [%s]", name, t.keyOf("backend"), t.keyOf("discovery"))
	}
	checkBackendsDistinct(t.c, p.Backends, backendKeys)
	checkWeights(t.c, p.Backends, backendKeys)
	checkBackups(t.c, p.Backends, backendKeys)
	if t.written("backup") {
		t.misplaced("backup", false, "backup is a key of each [[%s]]: it marks one backend as a backup of the pool's primaries", t.keyOf("backend"))
	}
	if vnodesOK && p.Algorithm == AlgorithmConsistentHash {
		checkRingSize(t.c, t.keyOf("ring_vnodes"), p.RingVnodes, p.Backends)
	}
	if maglevOK {
		checkMaglevSize(t.c, t.keyOf("maglev_table_size"), p.MaglevTableSize, len(p.Backends))
	}
	ht := t.sub("health")
	if ht != nil {
		decodeHealth(ht, &p.Health, use.protocol)
	}
	if use.protocol == ProtocolUDP && (ht == nil || !ht.written("type") && !ht.written("port")) {
		// A UDP service need not answer anything l4lb knows to send, nor
		// listen on TCP: by default its check is the one that needs
		// neither, ICMP unreachable. (A health port says "connect".)
		p.Health.Type = HealthICMP
	}
	if bt := t.sub("breaker"); bt != nil {
		decodeBreaker(bt, &p.Breaker, use)
	}
	t.done()
	return p
}

func decodeBackend(t *table) Backend {
	b := DefaultBackend()
	b.Line = t.c.pos.line(t.key)
	t.require("addr", "the backend's IP:port, e.g. \"127.0.0.1:9001\"")
	if t.str("addr", &b.Addr) {
		if _, err := parseAddr(b.Addr, roleDial); err != nil {
			t.c.add(t.keyOf("addr"), "%v", err)
		}
	}
	t.integer("weight", &b.Weight)
	t.str("id", &b.ID)
	t.integer("max_connections", &b.MaxConnections)
	t.boolean("backup", &b.Backup)
	t.done()
	return b
}

// decodeHealth reads [pool.NAME.health]; protocol is the pool's ("" when
// its listeners disagree, which is reported elsewhere).
func decodeHealth(t *table, h *Health, protocol string) {
	t.boolean("enabled", &h.Enabled)
	typeKnown := t.oneOf("type", &h.Type, "health check type")
	if typeKnown && h.Type == HealthICMP && protocol != ProtocolUDP {
		t.c.add(t.keyOf("type"), "\"icmp\" checks are for UDP pools (an empty datagram, failed by ICMP unreachable); a TCP pool checks with \"connect\" or \"send-expect\"")
	}
	if typeKnown && h.Type == HealthTLS && protocol == ProtocolUDP {
		t.c.add(t.keyOf("type"), "\"tls\" checks are for TCP pools (a TCP connect and a TLS handshake; DTLS is not spoken); a UDP pool checks with \"icmp\", \"send-expect\" or \"connect\"")
	}
	connect := !typeKnown || h.Type == HealthConnect
	sendExpect := !typeKnown || h.Type == HealthSendExpect
	tlsCheck := !typeKnown || h.Type == HealthTLS
	if !t.misplaced("port", connect || tlsCheck, "only for type = \"connect\" or \"tls\" checks: a %s check talks to the backend's own address", h.Type) {
		t.integer("port", &h.Port)
	}
	decodeTLSCheck(t, h, typeKnown && h.Type == HealthTLS, tlsCheck)
	notSendExpect := "only for type = \"send-expect\" checks: a connect check sends and reads nothing (set type = \"send-expect\")"
	send, sendOK := t.bytes("send", "send_hex", sendExpect, notSendExpect)
	h.Send = send
	h.Expect, _ = t.bytes("expect", "expect_hex", sendExpect, notSendExpect)
	if typeKnown && h.Type == HealthSendExpect && protocol == ProtocolUDP && sendOK && len(h.Send) == 0 {
		t.c.add(t.keyOf(t.writtenOr("send", t.writtenOr("send_hex", "type"))), "a send-expect check of a UDP pool needs bytes to send (send or send_hex): a UDP backend only answers what it receives")
	}
	intervalOK := t.durationIn("interval", &h.Interval)
	timeoutOK := t.durationIn("timeout", &h.Timeout)
	if intervalOK && timeoutOK && h.Timeout > h.Interval {
		t.c.add(t.keyOf(t.writtenOr("timeout", "interval")), "timeout %v is longer than interval %v: a check would still be running when the next one is due; lower timeout or raise interval", h.Timeout, h.Interval)
	}
	t.integer("rise", &h.Rise)
	t.integer("fall", &h.Fall)
	t.done()
}

func decodeBreaker(t *table, b *Breaker, use poolUse) {
	t.integer("failures", &b.Failures)
	t.durationIn("window", &b.Window)
	if lo, hi := t.spec("min_ratio").floatRange(); t.number("min_ratio", &b.MinRatio) && (b.MinRatio < lo || b.MinRatio > hi) {
		t.c.add(t.keyOf("min_ratio"), "%v is out of range: must be between %v (off) and %v", b.MinRatio, lo, hi)
	}
	t.integer("min_volume", &b.MinVolume)
	cooldownOK := t.durationIn("cooldown", &b.Cooldown)
	maxOK := t.durationIn("max_cooldown", &b.MaxCooldown)
	if cooldownOK && maxOK && b.MaxCooldown < b.Cooldown {
		t.c.add(t.keyOf(t.writtenOr("max_cooldown", "cooldown")), "max_cooldown %v is shorter than cooldown %v: the cooldown only ever doubles up to max_cooldown", b.MaxCooldown, b.Cooldown)
	}
	t.integer("successes", &b.Successes)
	tcp, udp := use.protocol != ProtocolUDP, use.protocol != ProtocolTCP
	noResets := "UDP has no connection to reset: count_no_reply judges a session's first datagram instead"
	if !t.misplaced("count_early_reset", tcp, "%s", use.notFor("count_early_reset", noResets)) {
		t.boolean("count_early_reset", &b.CountEarlyReset)
	}
	if !t.misplaced("early_reset_window", tcp, "%s", use.notFor("early_reset_window", noResets)) {
		t.durationIn("early_reset_window", &b.EarlyResetWindow)
	}
	if !t.misplaced("count_no_reply", udp, "%s", use.notFor("count_no_reply", "a TCP dial fails at its connect, or with count_early_reset at an early reset")) {
		t.boolean("count_no_reply", &b.CountNoReply)
	}
	t.done()
}
