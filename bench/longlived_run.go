package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// One system's run through the longlived scenario's phases (open,
// memory, idle, messages, upgrade, storm), on fresh namespaces and
// processes; longlived.go sizes and drives the runs.

// llValues is one system's longlived figures.
type llValues struct {
	vals     map[string]float64
	outlived bool // the old process outlived the upgrade wait
}

// runSystem runs one system through every phase in fresh namespaces and
// processes, and tears them down.
func (r *llRunner) runSystem(spec llSystemSpec) (llv llValues, storm map[string]float64, notes []string, err error) {
	p := r.plan
	llv.vals = map[string]float64{}
	storm = map[string]float64{}
	r.logf("longlived: %s: setting up", spec.name)
	shards := p.shards
	if spec.start == nil {
		shards = 0
	}
	if r.topo, err = newLLTopology(spec.name, max(shards, 1), p.backends); err != nil {
		return llv, storm, nil, err
	}
	defer func() {
		r.sup.stopAll()
		r.topo.remove(r.log)
		r.topo = nil
	}()
	if err := r.startBackends(); err != nil {
		return llv, storm, nil, err
	}
	var insts []*llInstance
	for k := range shards {
		in := &llInstance{listen: r.topo.listenIPs[k] + ":" + strconv.Itoa(llPort), dir: filepath.Join(r.dir, fmt.Sprintf("%s-%d", spec.name, k))}
		if err := os.MkdirAll(in.dir, 0o755); err != nil {
			return llv, storm, nil, err
		}
		if in.proc, err = spec.start(r, in); err != nil {
			return llv, storm, nil, err
		}
		insts = append(insts, in)
	}
	treePids := func() []int {
		var out []int
		for _, in := range insts {
			out = append(out, in.pids()...)
		}
		return out
	}
	if err := pinProcs(treePids(), r.layout.proxy); err != nil {
		r.logf("warning: %v", err)
	}
	targets := r.backendAddrs()
	if shards > 0 {
		targets = targets[:0]
		for _, in := range insts {
			targets = append(targets, in.listen)
		}
	}
	settleSlab(5 * time.Second)
	pids := treePids()
	rss0, _ := treeMemKB(pids)
	slab0, sock0 := slabKB(), sockMemKB()

	clients, err := r.startClients(targets)
	defer func() {
		var wg sync.WaitGroup
		for _, c := range clients {
			wg.Go(c.stop)
		}
		wg.Wait()
	}()
	if err != nil {
		return llv, storm, nil, err
	}
	r.logf("longlived: %s: opening %d connections", spec.name, p.n)
	t0 := time.Now()
	openBound := 60*time.Second + time.Duration(p.n)*2*time.Millisecond
	reps, err := allClients(clients, fmt.Sprintf("open %d", openBound.Milliseconds()), "open", openBound+30*time.Second)
	establish := time.Since(t0)
	if err != nil {
		return llv, storm, nil, err
	}
	held := sumReplies(reps, func(r llReply) int { return r.Held })
	failed := sumReplies(reps, func(r llReply) int { return r.Failed })
	llv.vals["conns"] = float64(held)
	llv.vals["establish_s"] = establish.Seconds()
	r.logf("longlived: %s: %d held, %d failed in %.1fs", spec.name, held, failed, establish.Seconds())
	if held == 0 {
		return llv, storm, nil, fmt.Errorf("no connection could be established (%d failed)", failed)
	}
	if failed > 0 {
		notes = append(notes, fmt.Sprintf("%s: %d of %d connections could not be established", spec.name, failed, p.n))
	}
	time.Sleep(llSettle)
	var cpids, bpids []int
	for _, c := range clients {
		cpids = append(cpids, c.cmd.Process.Pid)
	}
	for _, b := range r.bes {
		bpids = append(bpids, b.pid)
	}
	crss, _ := treeMemKB(cpids)
	brss, _ := treeMemKB(bpids)
	r.logf("longlived: %s: the load generator's own RSS with N held: clients %.1f MB (%d processes), backends %.1f MB (%d processes)",
		spec.name, crss/1024, len(cpids), brss/1024, len(bpids))
	pids = treePids()
	rss1, _ := treeMemKB(pids)
	slab1, sock1 := slabKB(), sockMemKB()
	llv.vals["slab_kb_per_conn"] = (slab1 - slab0) / float64(held)
	llv.vals["sockmem_kb_per_conn"] = (sock1 - sock0) / float64(held)
	if shards > 0 {
		llv.vals["rss_kb_per_conn"] = (rss1 - rss0) / float64(held)
		llv.vals["rss_mb"] = rss1 / 1024
	}

	lines0, tIdle := interimLines(insts), time.Now()
	cpu0 := cpuSeconds(treePids())
	time.Sleep(llIdleWindow)
	if shards > 0 {
		llv.vals["idle_cpu_ms_per_s"] = (cpuSeconds(treePids()) - cpu0) * 1000 / llIdleWindow.Seconds()
	}
	if spec.accessLog {
		llv.vals["interim_per_s"] = interimRate(insts, lines0, tIdle)
	}

	r.logf("longlived: %s: messages for %v", spec.name, p.window)
	cpu0 = cpuSeconds(treePids())
	busy0, lbusy0 := readCPUTimes(r.layout.proxy), readCPUTimes(r.layout.loadgen)
	t0 = time.Now()
	reps, err = allClients(clients, fmt.Sprintf("msgs %d %d", p.window.Milliseconds(), p.period.Milliseconds()), "msgs", p.window+30*time.Second)
	cpuMsgs := cpuSeconds(treePids()) - cpu0
	if share, ok := busyShare(lbusy0, readCPUTimes(r.layout.loadgen)); ok {
		llv.vals["loadgen_busy_pct"] = share
	}
	if share, ok := busyShare(busy0, readCPUTimes(r.layout.proxy)); ok {
		// What else ran on the proxy's CPUs meanwhile: the machine is
		// shared, and a busy neighbour shows in the round trips' tail.
		own := 100 * cpuMsgs / time.Since(t0).Seconds() / float64(len(r.layout.proxy))
		llv.vals["others_on_proxy_cpu_pct"] = max(0, share-own)
	}
	if err != nil {
		return llv, storm, notes, err
	}
	h := rttHist{}
	var echoed, lost uint64
	for _, rep := range reps {
		h.merge(rep.Hist)
		echoed += rep.Echoed
		lost += rep.Lost
	}
	llv.vals["p50_us"], llv.vals["p99_us"] = h.quantile(0.50), h.quantile(0.99)
	llv.vals["msgs"], llv.vals["lost"] = float64(echoed), float64(lost)
	if shards > 0 && echoed > 0 {
		llv.vals["cpu_us_per_msg"] = cpuMsgs * 1e6 / float64(echoed)
	}

	// The upgrade with all N held (what the hand-over is measured on),
	// then the storm on the processes that took over.
	if spec.reload != nil {
		life, outlived, broken, err := r.upgrade(spec, insts, clients)
		if err != nil {
			return llv, storm, notes, err
		}
		llv.vals["upgrade_s"], llv.vals["upgrade_broken"] = life.Seconds(), float64(broken)
		llv.outlived = outlived
		if spec.name == "l4lb" {
			if relays, took, ok := l4lbHandover(insts); ok {
				llv.vals["handed_over"], llv.vals["handover_s"] = float64(relays), took.Seconds()
			} else {
				notes = append(notes, "l4lb: no instance logged \"upgrade: handed over established connections\": this build drains its connections on upgrade (for shutdown_timeout) instead of handing them over")
			}
		}
	}
	before := cpuByPid(treePids())
	storm, err = r.storm(spec, clients)
	if shards > 0 {
		storm["proxy_cpu_s"] = cpuSince(before, treePids())
	}
	if err != nil {
		notes = append(notes, fmt.Sprintf("%s: storm: %v", spec.name, err))
	}
	return llv, storm, notes, nil
}

func sumReplies(reps []llReply, f func(llReply) int) int {
	n := 0
	for _, r := range reps {
		n += f(r)
	}
	return n
}
