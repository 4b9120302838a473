package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"
)

// options is the whole configuration of one run.
type options struct {
	quick  bool
	rounds int
	// rotate: each round starts one system later than the round before
	// (systemsInRound).
	rotate         bool
	runTime        time.Duration // bulk and conn run length
	pause          time.Duration // between two systems' runs
	pingCount      int
	idleCap        int
	idleSettle     time.Duration
	failDead       time.Duration
	failRecoverMax time.Duration
	portBase       int
	pin            bool
	threads        int // proxy threads/workers; 0: the CPUs the proxy may use
	user           string
	keep           bool
	scenarios      []string
	systems        []string
	jsonPath       string
	svgPath        string
	// appendTo: splice the run's section into this page (report_section.go).
	appendTo string
	// chaos runs alone (-scenario chaos): l4lb under faults in a network
	// namespace of its own, for chaosDuration (chaos.go).
	chaos         bool
	chaosDuration time.Duration
	seed          uint64
	chaosL4lb     string
	// baseline: an l4lb binary run as the l4lb-base system beside this
	// tree's l4lb (l4lb_baseline.go).
	baseline string
	// longlived runs alone (-scenario longlived): N long-lived
	// connections and a reconnect storm in namespaces of its own
	// (longlived.go).
	longlived bool
	ll        llOptions
	// fleet runs alone (-scenario fleet): a simulated fleet's stores on
	// one redis-server (fleet.go).
	fleet bool
	fl    fleetOptions
}

// profile fills what the flags left at zero: the full profile (5 rounds,
// 5 s runs) or -quick (3 rounds, short runs, about five minutes).
func (o *options) profile() {
	full := options{rounds: 5, runTime: 5 * time.Second, pause: time.Second, pingCount: 20000,
		idleCap: maxIdleConns, idleSettle: 2 * time.Second, failDead: 3 * time.Second, failRecoverMax: 12 * time.Second}
	quick := options{rounds: 3, runTime: time.Second, pause: 200 * time.Millisecond, pingCount: 3000,
		idleCap: 2000, idleSettle: time.Second, failDead: 1500 * time.Millisecond, failRecoverMax: 8 * time.Second}
	p := full
	if o.quick {
		p = quick
	}
	if o.rounds == 0 {
		o.rounds = p.rounds
	}
	o.runTime, o.pause, o.pingCount, o.idleCap = p.runTime, p.pause, p.pingCount, p.idleCap
	o.idleSettle, o.failDead, o.failRecoverMax = p.idleSettle, p.failDead, p.failRecoverMax
}

func main() {
	if len(os.Args) > 2 && os.Args[1] == "-role" {
		if err := runRole(os.Args[2], os.Args[3:]); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	opts, err := parseFlags(os.Args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	if opts.chaos {
		os.Exit(chaosMain(opts, os.Stdout, os.Stderr))
	}
	if opts.longlived {
		os.Exit(longlivedMain(opts, opts.ll, os.Stdout, os.Stderr))
	}
	if opts.fleet {
		os.Exit(fleetMain(opts.fl, os.Stdout, os.Stderr))
	}
	if err := run(opts, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func runRole(role string, args []string) error {
	switch role {
	case "backend":
		return runBackendRole(args)
	case "goproxy":
		return runGoproxyRole(args)
	case "chaos-inner":
		return runChaosInnerRole(args)
	case "chaos-backend":
		return runChaosBackendRole(args)
	case "llclient":
		return runLonglivedClientRole(args)
	case "llbackend":
		return runLonglivedBackendRole(args)
	}
	return fmt.Errorf("unknown role %q", role)
}

func parseFlags(args []string) (options, error) {
	var o options
	var scen, sys string
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.BoolVar(&o.quick, "quick", false, "3 rounds of short runs (about five minutes on 2 cores with every scenario)")
	fs.IntVar(&o.rounds, "rounds", 0, "rounds per scenario (0: 5, or 3 with -quick)")
	fs.BoolVar(&o.rotate, "rotate", false, "each round starts one system later (A B C, B C A, C A B, ...), so no system always runs right after the same one")
	fs.StringVar(&scen, "scenario", "", "comma-separated scenarios (default all): "+strings.Join(scenarioNames(), ",")+
		"; or chaos or longlived, alone (need root); or fleet, alone")
	fs.IntVar(&o.fl.instances, "instances", 10, "fleet: simulated l4lb instances (each a fleet store of its own)")
	fs.IntVar(&o.fl.backends, "backends", 100, "fleet: backends (breakers) per instance")
	fs.IntVar(&o.fl.trips, "trips", 5, "fleet: backends tripped (and recovered) in the trip phase")
	fs.DurationVar(&o.fl.refresh, "refresh", 500*time.Millisecond, "fleet: the breakers' snapshot refresh (l4lb's: 500ms); longer costs the one simulating process less CPU")
	fs.DurationVar(&o.fl.timeout, "store-timeout", 0, "fleet: [cluster] timeout (0: l4lb's default)")
	var llConns, llSystems string
	fs.StringVar(&llConns, "longlived-conns", "10000", "longlived: connections held, a comma list runs each N in turn (e.g. 10000,100000)")
	fs.IntVar(&o.ll.shards, "longlived-instances", 0, "longlived: proxy instances (0: as RLIMIT_NOFILE requires, at most 9000 connections each)")
	fs.StringVar(&llSystems, "longlived-systems", "direct,l4lb,haproxy,nginx", "longlived: systems, in order")
	fs.StringVar(&o.appendTo, "append", "", "put the run's section into this Markdown file instead of printing the page: "+
		"longlived, each N's (replacing that N's earlier one); other scenarios, one section named by the scenario list (replacing the same list's)")
	fs.DurationVar(&o.chaosDuration, "duration", 5*time.Minute, "chaos: how long faults and clients run; fleet: the idle and trip phases together (default "+fleetDefaultDuration.String()+")")
	fs.StringVar(&o.chaosL4lb, "l4lb", "", "chaos: run this l4lb binary instead of building ./cmd/l4lb (e.g. to bisect)")
	fs.StringVar(&o.baseline, "baseline", "", "also run this l4lb binary, as the system "+sysL4lbBase+" right after l4lb: a change's before and after in one run")
	fs.Uint64Var(&o.seed, "seed", 0, "chaos: seed of sizes, client behaviour and fault schedule (0: from the clock)")
	fs.StringVar(&sys, "systems", "", "comma-separated systems (default all but the opt-in "+strings.Join(optInSystemNames(), ",")+"): "+strings.Join(systemNames(), ","))
	fs.StringVar(&o.jsonPath, "json", "", "write the results as a JSON array to this file (fleet: one object)")
	fs.StringVar(&o.svgPath, "svg", "", "write the comparison chart to this SVG file")
	fs.StringVar(&o.user, "user", "", "run the proxies as this user (e.g. nobody); the harness must be root")
	fs.IntVar(&o.portBase, "port-base", 21000, "first port of the port plan on 127.0.0.1")
	fs.BoolVar(&o.pin, "pin", true, "pin load generator and proxy apart (2+ CPUs)")
	fs.IntVar(&o.threads, "threads", 0, "proxy threads/workers/GOMAXPROCS (0: as many as CPUs the proxy is pinned to; all cores with -pin=false)")
	fs.BoolVar(&o.keep, "keep", false, "keep the run directory (configs, logs)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if names := strings.Split(scen, ","); slices.Contains(names, "chaos") {
		if len(names) > 1 {
			return o, errors.New("-scenario chaos runs alone")
		}
		if o.chaosDuration < 10*time.Second {
			return o, fmt.Errorf("-duration %v: at least 10s", o.chaosDuration)
		}
		o.chaos = true
		return o, nil
	}
	if names := strings.Split(scen, ","); slices.Contains(names, "fleet") {
		if len(names) > 1 {
			return o, errors.New("-scenario fleet runs alone")
		}
		o.fleet = true
		o.fl.duration, o.fl.jsonPath = fleetDefaultDuration, o.jsonPath
		fs.Visit(func(f *flag.Flag) {
			if f.Name == "duration" {
				o.fl.duration = o.chaosDuration
			}
		})
		return o, nil
	}
	if names := strings.Split(scen, ","); slices.Contains(names, "longlived") {
		if len(names) > 1 {
			return o, errors.New("-scenario longlived runs alone")
		}
		o.longlived = true
		o.ll.appendTo = o.appendTo
		return o, o.ll.parse(llConns, llSystems)
	}
	var err error
	if o.scenarios, err = pickNames(scen, scenarioNames(), "scenario"); err != nil {
		return o, err
	}
	if o.systems, err = pickNames(sys, systemNames(), "system"); err != nil {
		return o, err
	}
	if strings.TrimSpace(sys) == "" {
		o.systems = defaultSystemNames()
	}
	if o.baseline != "" && !slices.Contains(o.systems, sysL4lbBase) {
		o.systems = append(o.systems, sysL4lbBase)
	}
	if o.portBase < 1024 || o.portBase+600+10*len(systemNames()) > 65535 {
		return o, fmt.Errorf("-port-base %d out of range", o.portBase)
	}
	o.profile()
	return o, nil
}

func scenarioNames() []string {
	var out []string
	for _, s := range scenarioCatalog() {
		out = append(out, s.name())
	}
	return out
}

func systemNames() []string {
	var out []string
	for _, s := range systemCatalog() {
		out = append(out, s.name)
	}
	return out
}

// pickNames parses a comma list against the known names; empty = all.
func pickNames(list string, known []string, what string) ([]string, error) {
	if strings.TrimSpace(list) == "" {
		return known, nil
	}
	var out []string
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		if !slices.Contains(known, n) {
			return nil, fmt.Errorf("unknown %s %q (known: %s)", what, n, strings.Join(known, ","))
		}
		out = append(out, n)
	}
	return out, nil
}

func run(opts options, stdout, log io.Writer) error {
	if opts.user != "" && os.Geteuid() != 0 {
		return errors.New("-user needs the harness to run as root")
	}
	h, err := newHarness(opts, log)
	if err != nil {
		return err
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		s := <-sigs
		h.logf("bench: %v: stopping every child", s)
		h.tearDown()
		os.Exit(130)
	}()
	defer h.tearDown()

	var specs []systemSpec
	for _, s := range systemCatalog() {
		if slices.Contains(opts.systems, s.name) {
			specs = append(specs, s)
		}
	}
	h.logf("bench: %d CPUs, RLIMIT_NOFILE %d, %s", h.ncpu, h.limit, h.layout)
	if err := h.setUp(specs); err != nil {
		return err
	}
	if len(h.systems) == 0 {
		return errors.New("no system could be started")
	}
	var results []*ScenarioResult
	for _, sc := range scenarioCatalog() {
		if !slices.Contains(opts.scenarios, sc.name()) {
			continue
		}
		h.logf("bench: scenario %s", sc.name())
		results = append(results, runScenario(h, sc))
	}
	rep := report{meta: h.meta(), results: results}
	if opts.appendTo != "" {
		if err := appendRunSection(opts.appendTo, opts.scenarios, rep); err != nil {
			return err
		}
	} else if _, err := io.WriteString(stdout, renderMarkdown(rep)); err != nil {
		return err
	}
	if opts.jsonPath != "" {
		if err := os.WriteFile(opts.jsonPath, renderJSON(results), 0o644); err != nil {
			return err
		}
	}
	if opts.svgPath != "" {
		if err := os.WriteFile(opts.svgPath, []byte(renderSVG(results)), 0o644); err != nil {
			return err
		}
	}
	return nil
}
