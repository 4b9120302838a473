package admin

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/l4lb/l4lb/pkg/fleet"
)

// Metrics of the fleet's shared store ([cluster] store = "redis"); absent
// with the process's own store, which cannot be down.
var (
	descStoreUp = desc("l4lb_cluster_store_up",
		"1 while breaker decisions are the fleet's (the Redis store answers); 0 while this instance decides alone on its local copy.")
	descStoreOps = desc("l4lb_cluster_store_operation_seconds",
		"Time of the cluster store's Redis operations, by op (read, trip, close, reopen, acquire_probe, release_probe, disable, enable, merge, ping, members_read, members_write, unvote, shared_read, shared_write).", "op")
	descStoreErrors = desc("l4lb_cluster_store_errors_total",
		"Cluster store operations that failed (timed out, refused, or answered with an error), by op.", "op")
	descSnapshotAge = desc("l4lb_cluster_snapshot_age_seconds",
		"Time since Redis last answered this instance: how old its view of the fleet's breaker state may be.")
	descInvalidations = desc("l4lb_cluster_invalidations_total",
		"Writes to cached keys the Redis server told of (broadcast client-side caching invalidations; this instance's own writes included).")
	descReconciled = desc("l4lb_cluster_reconciled_keys_total",
		"Breaker keys merged into Redis after an outage (decided locally while apart, or lost by Redis).")
)

func describeCluster(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descStoreUp, descStoreOps, descStoreErrors, descSnapshotAge, descInvalidations, descReconciled} {
		ch <- d
	}
}

func collectCluster(ch chan<- prometheus.Metric, s *fleet.Store) {
	if s == nil {
		return
	}
	up := 0.0
	if s.Up() {
		up = 1
	}
	ch <- prometheus.MustNewConstMetric(descStoreUp, prometheus.GaugeValue, up)
	ch <- prometheus.MustNewConstMetric(descSnapshotAge, prometheus.GaugeValue, s.SnapshotAge().Seconds())
	ch <- prometheus.MustNewConstMetric(descInvalidations, prometheus.CounterValue, float64(s.Invalidations()))
	ch <- prometheus.MustNewConstMetric(descReconciled, prometheus.CounterValue, float64(s.Reconciled()))
	for _, op := range s.OpStats() {
		ch <- prometheus.MustNewConstHistogram(descStoreOps, op.Count, op.Sum, op.Bucket, op.Op)
		ch <- prometheus.MustNewConstMetric(descStoreErrors, prometheus.CounterValue, float64(op.Errors), op.Op)
	}
}
