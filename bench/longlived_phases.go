package main

import (
	"fmt"
	"math"
	"syscall"
	"time"
)

// The longlived scenario's two disruptive phases: the reconnect storm and
// the upgrade or reload, each with N held.

// storm kills every backend process at once with N held, starts them
// again at once, and waits until every client connection was dropped and
// served again (or given up on); nstat before and after, in each
// namespace, counts what the kernel dropped.
func (r *llRunner) storm(spec llSystemSpec, clients []*llClientProc) (map[string]float64, error) {
	out := map[string]float64{}
	nsList := []string{r.topo.cli, r.topo.lb, r.topo.srv}
	before := map[string]map[string]uint64{}
	for _, ns := range nsList {
		m, err := readNstat(ns)
		if err != nil {
			return out, err
		}
		before[ns] = m
	}
	if _, err := allClients(clients, fmt.Sprintf("storm %d", llStormBound.Milliseconds()), "armed", 10*time.Second); err != nil {
		return out, err
	}
	r.logf("longlived: %s: storm: killing %d backend processes", spec.name, len(r.bes))
	for _, be := range r.bes {
		_ = syscall.Kill(-be.pid, syscall.SIGKILL)
	}
	tKill := time.Now()
	for _, be := range r.bes {
		r.sup.kill(be)
	}
	if err := r.startBackends(); err != nil {
		return out, fmt.Errorf("restarting the backends: %w", err)
	}
	out["backend_restart_ms"] = float64(time.Since(tKill).Microseconds()) / 1000
	reps, err := allClients(clients, "", "storm", llStormBound+30*time.Second)
	if err != nil {
		return out, err
	}
	var last int64
	for _, rep := range reps {
		last = max(last, rep.LastNS)
		out["failed"] += float64(rep.Failed)
		out["not_dropped"] += float64(rep.NotDrop)
		out["served"] += float64(rep.Served)
		out["attempts_per_conn"] += float64(rep.Attempts)
	}
	out["attempts_per_conn"] /= float64(r.plan.n)
	out["recover_s"] = math.NaN()
	if last > 0 {
		out["recover_s"] = time.Duration(last - tKill.UnixNano()).Seconds()
	}
	delta := map[string]map[string]uint64{}
	for _, ns := range nsList {
		m, err := readNstat(ns)
		if err != nil {
			return out, err
		}
		delta[ns] = nstatDelta(before[ns], m)
	}
	stormCounters(out, delta[r.topo.cli], delta[r.topo.lb], delta[r.topo.srv], spec.start != nil)
	for _, ns := range nsList {
		r.logf("longlived: %s: storm: nstat %s: %s", spec.name, ns, formatCounters(delta[ns]))
	}
	return out, nil
}

// stormCounters puts the storm's kernel counters into out: listen-queue
// overflows and drops where the proxy listens (lb, proxies only) and
// where the backends listen (srv), and SYN retransmits of the clients
// and of the proxy's own dials.
func stormCounters(out map[string]float64, cli, lb, srv map[string]uint64, proxy bool) {
	if proxy {
		out["proxy_listen_overflows"] = float64(lb["TcpExtListenOverflows"])
		out["proxy_listen_drops"] = float64(lb["TcpExtListenDrops"])
		out["proxy_syn_retrans"] = float64(lb["TcpExtTCPSynRetrans"])
	}
	out["backend_listen_overflows"] = float64(srv["TcpExtListenOverflows"])
	out["backend_listen_drops"] = float64(srv["TcpExtListenDrops"])
	out["client_syn_retrans"] = float64(cli["TcpExtTCPSynRetrans"])
}

// formatCounters lists the nonzero counters of nstatCounters.
func formatCounters(m map[string]uint64) string {
	s := ""
	for _, k := range nstatCounters {
		if v := m[k]; v > 0 {
			s += fmt.Sprintf("%s=%d ", k, v)
		}
	}
	if s == "" {
		return "all zero"
	}
	return s
}

// upgrade upgrades (l4lb) or reloads (peers) every instance at once with
// N held, waits until every old process or worker has exited or the
// plan's bound passes, then has every connection send one message:
// broken counts those that no longer answer.
func (r *llRunner) upgrade(spec llSystemSpec, insts []*llInstance, clients []*llClientProc) (life time.Duration, outlived bool, broken int, err error) {
	r.logf("longlived: %s: upgrade/reload of %d instances, waiting up to %v for the old processes", spec.name, len(insts), r.plan.upgradeWait)
	t0 := time.Now()
	var old []int
	for _, in := range insts {
		pids, err := spec.reload(in)
		if err != nil {
			return 0, false, 0, err
		}
		old = append(old, pids...)
	}
	deadline := t0.Add(r.plan.upgradeWait)
	for {
		alive := 0
		for _, pid := range old {
			if !pidGone(pid) {
				alive++
			}
		}
		if alive == 0 {
			life = time.Since(t0)
			break
		}
		if time.Now().After(deadline) {
			life, outlived = r.plan.upgradeWait, true
			r.logf("longlived: %s: %d of %d old processes still alive after %v", spec.name, alive, len(old), r.plan.upgradeWait)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.logf("longlived: %s: old processes gone after %.2fs (outlived the wait: %v); checking every connection", spec.name, life.Seconds(), outlived)
	rate := max(1, llCheckRate/len(clients))
	reps, err := allClients(clients, fmt.Sprintf("check %d", rate), "check", time.Duration(r.plan.n/len(clients)/rate)*time.Second+time.Minute)
	if err != nil {
		return life, outlived, 0, err
	}
	broken = sumReplies(reps, func(r llReply) int { return r.Broken })
	return life, outlived, broken, nil
}
