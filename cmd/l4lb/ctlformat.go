package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/l4lb/l4lb/pkg/admin"
	"github.com/l4lb/l4lb/pkg/server"
)

// showCtl prints the API's answer to req for people: what was done, then
// the backends concerned as a table.
func showCtl(w io.Writer, req ctlRequest, body []byte) error {
	switch req.verb {
	case "pools":
		var v admin.PoolsJSON
		if err := json.Unmarshal(body, &v); err != nil {
			return err
		}
		printPools(w, v.Pools...)
	case "pool", "add", "remove", "fleet-replace":
		var v admin.PoolJSON
		if err := json.Unmarshal(body, &v); err != nil {
			return err
		}
		if said := membershipDone(req); said != "" {
			fmt.Fprintln(w, said)
		}
		printPools(w, v)
	case "reload":
		var v server.ReloadResult
		if err := json.Unmarshal(body, &v); err != nil {
			return err
		}
		printReload(w, v)
	default: // an action on one backend answers with the backend
		var b admin.BackendJSON
		if err := json.Unmarshal(body, &b); err != nil {
			return err
		}
		fmt.Fprintln(w, actionDone(req, b))
		printPools(w, admin.PoolJSON{Name: req.args[0], Backends: []admin.BackendJSON{b}})
	}
	return nil
}

// actionDone says what an action on a backend did.
func actionDone(req ctlRequest, b admin.BackendJSON) string {
	where := b.Addr + " in pool " + req.args[0]
	switch req.verb {
	case "disable":
		return "disabled " + where + ": no new clients until enable"
	case "enable":
		return "enabled " + where
	case "probe":
		return "asked the open breaker of " + where + " for its recovery probe; the probe decides"
	case "drain":
		if b.Drain == nil {
			return "draining " + where
		}
		where += scopeNote(b.Drain.Scope)
		switch n, at := b.Drain.Remaining, b.Drain.Deadline.Local().Format(time.TimeOnly); n {
		case 0:
			return "draining " + where + ": no new clients; none is open"
		case 1:
			return fmt.Sprintf("draining %s: no new clients; the connection open is reset at %s unless it ends first", where, at)
		default:
			return fmt.Sprintf("draining %s: no new clients; the %d connections open are reset at %s unless they end first", where, n, at)
		}
	case "weight":
		return fmt.Sprintf("weight of %s%s: %d for new picks", where, scopeNote(b.WeightScope), b.Weight)
	}
	return req.verb + " " + where
}

// membershipDone says what add and remove did ("" for a read).
func membershipDone(req ctlRequest) string {
	switch req.verb {
	case "add":
		return "added " + req.args[1] + " to pool " + req.args[0] + ": it takes clients once its health checks pass"
	case "remove":
		timeout := admin.DefaultDrainTimeout.String() + " (the default)"
		if req.flags.timeoutSet {
			timeout = req.flags.timeout.String()
		}
		return "removing " + req.args[1] + " from pool " + req.args[0] + ": no new clients; connections still open after " + timeout + " are reset"
	case "fleet-replace":
		return "the fleet's record of pool " + req.args[0] + "'s API-added backends is now this instance's list: every instance follows it"
	}
	return ""
}

// printPools is the table of pools' backends, then the causes of failed
// health checks.
func printPools(w io.Writer, pools ...admin.PoolJSON) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "POOL\tBACKEND\tSOURCE\tWEIGHT\tHEALTH\tBREAKER\tCONNECTIONS\tSTATE")
	var causes []string
	for _, p := range pools {
		if len(p.Backends) == 0 {
			fmt.Fprintf(tw, "%s\t(none)\t\t\t\t\t\t\n", p.Name)
		}
		for _, b := range p.Backends {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.Name, b.Addr, b.Source, weightCell(b), b.Health,
				breakerCell(b.Breaker), connectionsCell(b), stateCell(b))
			if b.LastCheckError != "" {
				causes = append(causes, fmt.Sprintf("%s %s: last health check: %s", p.Name, b.Addr, b.LastCheckError))
			}
		}
		// Gone from the pool, connections still finishing on them.
		for _, l := range p.Leaving {
			fmt.Fprintf(tw, "%s\t%s\t\t\t\t\t%d\tleft the pool\n", p.Name, l.Addr, l.ActiveConnections)
		}
	}
	tw.Flush()
	for _, c := range causes {
		fmt.Fprintln(w, c)
	}
	for _, p := range pools {
		if line := discoveryLine(p); line != "" {
			fmt.Fprintln(w, line)
		}
	}
}

// discoveryLine says what a pool's DNS discovery is going through when
// the table cannot show it (the last set is kept): lookups failing, or
// answers with no records in the empty grace; "" when it is well.
func discoveryLine(p admin.PoolJSON) string {
	d := p.Discovery
	if d == nil {
		return ""
	}
	at := func(t *time.Time) string {
		if t == nil {
			return "?"
		}
		return t.Local().Format(time.TimeOnly)
	}
	switch {
	case d.Failing && d.LastSuccess == nil && d.Backends == 0:
		return fmt.Sprintf("%s: DNS discovery of %s failing since %s (%s); no backend found in DNS serves yet", p.Name, d.Name, at(d.FailingSince), d.LastError)
	case d.Failing:
		return fmt.Sprintf("%s: DNS discovery of %s failing since %s (%s); the last %d backends found serve", p.Name, d.Name, at(d.FailingSince), d.LastError, d.Backends)
	case d.EmptySince != nil:
		return fmt.Sprintf("%s: DNS discovery of %s finds no records since %s; the last %d backends found serve until empty_grace ends", p.Name, d.Name, at(d.EmptySince), d.Backends)
	}
	return ""
}

// weightCell is the weight in use, and the configured one when an
// operator's differs.
func weightCell(b admin.BackendJSON) string {
	fleet := ""
	if b.WeightScope == "fleet" {
		fleet = "fleet's; "
	}
	if b.Weight == b.ConfiguredWeight && fleet == "" {
		return fmt.Sprint(b.Weight)
	}
	return fmt.Sprintf("%d (%sconfigured %d)", b.Weight, fleet, b.ConfiguredWeight)
}

func breakerCell(br admin.BreakerJSON) string {
	if br.State == "open" && br.CooldownLeftSeconds > 0 {
		return fmt.Sprintf("open (probe in %s)", seconds(br.CooldownLeftSeconds))
	}
	return br.State
}

// connectionsCell is the connections open, out of the cap when there is
// one.
func connectionsCell(b admin.BackendJSON) string {
	if b.MaxConnections > 0 {
		return fmt.Sprintf("%d/%d", b.ActiveConnections, b.MaxConnections)
	}
	return fmt.Sprint(b.ActiveConnections)
}

// stateCell says whether the backend takes new clients, and if not the
// operator's reason first.
func stateCell(b admin.BackendJSON) string {
	switch {
	case b.Disabled:
		return "disabled"
	case b.Drain != nil && b.Drain.Scope == "fleet":
		return fmt.Sprintf("draining fleet-wide (%d left, reset in %s)", b.Drain.Remaining, seconds(b.Drain.DeadlineLeftSeconds))
	case b.Drain != nil:
		return fmt.Sprintf("draining (%d left, reset in %s)", b.Drain.Remaining, seconds(b.Drain.DeadlineLeftSeconds))
	case b.Draining:
		return "draining"
	case b.Usable:
		return "in rotation"
	}
	return "out of rotation"
}

func seconds(s float64) string {
	return (time.Duration(s * float64(time.Second))).Round(100 * time.Millisecond).String()
}

// printReload says what a reload did.
func printReload(w io.Writer, r server.ReloadResult) {
	hash := r.Hash
	if len(hash) > 12 {
		hash = hash[:12]
	}
	fmt.Fprintf(w, "reloaded (%s): listeners %d kept, %d added, %d removed; %d pools\n", hash, r.Kept, r.Added, r.Removed, r.Pools)
	var changes map[string][]string
	raw, _ := json.Marshal(r.Changes)
	json.Unmarshal(raw, &changes)
	keys := make([]string, 0, len(changes))
	for k := range changes {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "  %s: %s\n", strings.ReplaceAll(k, "_", " "), strings.Join(changes[k], ", "))
	}
	for _, warning := range r.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warning)
	}
}

// scopeNote says that a drain or weight is the fleet's (a local one, as
// without a fleet, needs no word).
func scopeNote(scope string) string {
	if scope == "fleet" {
		return " on every instance of the fleet"
	}
	return ""
}
