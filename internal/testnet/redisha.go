package testnet

import (
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Redis that fails over, for the fleet store's failover tests: a master
// with a replica watched by real redis-sentinel processes (Debian package
// redis-sentinel), and a real Redis Cluster of redis-server nodes made by
// redis-cli --cluster create (redis-cli is in redis-tools, which
// redis-server depends on). Every process is a Redis of this file's
// neighbour redis.go: on 127.0.0.1, in the test's temporary directory,
// killed and waited for when the test ends.

// noSyncDelay has a master start a replica's first sync at once, not
// after the 5 s it waits by default for more replicas to share it.
var noSyncDelay = []string{"--repl-diskless-sync-delay", "0"}

// SentinelSet is a master, its replica and the Sentinels that watch them.
type SentinelSet struct {
	Name      string // the master set's name
	Master    *Redis // the master at the start
	Replica   *Redis // the replica at the start, promoted when Master dies
	Sentinels []*Redis
}

// sentinelDownAfter is how long the Sentinels wait for a master that does
// not answer before they vote it down: short, so that a failover takes a
// few seconds, not a minute.
const sentinelDownAfter = 1000 * time.Millisecond

// StartSentinelSet starts a master, a replica of it (replicating from
// replicaOf when not "", such as a proxy in front of the master the test
// cuts, else from the master itself) and three Sentinels monitoring the
// master as name with a quorum of two, and waits until every Sentinel
// knows the replica and the other Sentinels. Without redis-sentinel the
// test fails or skips as Missing says.
func StartSentinelSet(t testing.TB, name string, replicaOf func(master *Redis) string) *SentinelSet {
	t.Helper()
	bin := ToolPath("redis-sentinel")
	if bin == "" {
		Missing(t, "redis-sentinel not installed", "redis-sentinel")
	}
	set := &SentinelSet{Name: name, Master: StartRedis(t, noSyncDelay...)}
	from := set.Master.Addr
	if replicaOf != nil {
		from = replicaOf(set.Master)
	}
	host, port := splitAddr(t, from)
	set.Replica = StartRedis(t, "--replicaof", host, port)
	WaitReplicated(t, set.Replica)
	mhost, mport := splitAddr(t, set.Master.Addr)
	conf := fmt.Sprintf("sentinel monitor %s %s %s 2\nsentinel down-after-milliseconds %s %d\nsentinel failover-timeout %s 10000\n",
		name, mhost, mport, name, sentinelDownAfter.Milliseconds(), name)
	for range 3 {
		set.Sentinels = append(set.Sentinels, startRedisProcess(t, bin, []byte(conf), nil))
	}
	for _, s := range set.Sentinels {
		Eventually(t, "sentinel "+s.Addr+" knows the replica and the other sentinels", func() bool {
			v, err := s.Do("SENTINEL", "MASTER", name)
			if err != nil {
				return false
			}
			f := pairs(v)
			return f["num-slaves"] == "1" && f["num-other-sentinels"] == "2" && f["flags"] == "master"
		})
	}
	return set
}

// SentinelAddrs are the Sentinels' host:port.
func (s *SentinelSet) SentinelAddrs() []string {
	var out []string
	for _, r := range s.Sentinels {
		out = append(out, r.Addr)
	}
	return out
}

// MasterAddr is the master's host:port as the first Sentinel that answers
// says.
func (s *SentinelSet) MasterAddr() string {
	for _, r := range s.Sentinels {
		v, err := r.Do("SENTINEL", "GET-MASTER-ADDR-BY-NAME", s.Name)
		if err == nil {
			if host, port, ok := strings.Cut(v, "\n"); ok {
				return host + ":" + port
			}
		}
	}
	return ""
}

// WaitPromoted waits until every Sentinel names the replica as the master
// and the replica says it is one.
func (s *SentinelSet) WaitPromoted(t testing.TB) {
	t.Helper()
	Eventually(t, "the sentinels promote "+s.Replica.Addr, func() bool {
		for _, r := range s.Sentinels {
			v, err := r.Do("SENTINEL", "GET-MASTER-ADDR-BY-NAME", s.Name)
			if err != nil || strings.ReplaceAll(v, "\n", ":") != s.Replica.Addr {
				return false
			}
		}
		role, err := s.Replica.Do("ROLE")
		return err == nil && strings.HasPrefix(role, "master\n")
	})
}

// WaitReplicated waits until replica's link to its master is up and it has
// loaded the master's data.
func WaitReplicated(t testing.TB, replica *Redis) {
	t.Helper()
	Eventually(t, replica.Addr+" replicates its master", func() bool {
		v, err := replica.Do("INFO", "replication")
		return err == nil && strings.Contains(v, "master_link_status:up") && strings.Contains(v, "master_sync_in_progress:0")
	})
}

// WaitCaughtUp waits until replica has every write master made so far:
// its replication offset reached the master's.
func WaitCaughtUp(t testing.TB, master, replica *Redis) {
	t.Helper()
	offset := func(r *Redis, field string) (int64, bool) {
		v, err := r.Do("INFO", "replication")
		if err != nil {
			return 0, false
		}
		for line := range strings.SplitSeq(v, "\r\n") {
			if s, ok := strings.CutPrefix(line, field+":"); ok {
				n, err := strconv.ParseInt(s, 10, 64)
				return n, err == nil
			}
		}
		return 0, false
	}
	want, ok := offset(master, "master_repl_offset")
	if !ok {
		t.Fatalf("%s: no master_repl_offset in INFO replication", master.Addr)
	}
	Eventually(t, replica.Addr+" catches up with "+master.Addr, func() bool {
		got, ok := offset(replica, "slave_repl_offset")
		return ok && got >= want
	})
}

// pairs reads a flat list of field and value lines (SENTINEL MASTER's
// answer) as a map.
func pairs(v string) map[string]string {
	f := strings.Split(v, "\n")
	m := map[string]string{}
	for i := 0; i+1 < len(f); i += 2 {
		m[f[i]] = f[i+1]
	}
	return m
}

func splitAddr(t testing.TB, addr string) (host, port string) {
	t.Helper()
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		t.Fatalf("%q is not host:port", addr)
	}
	return addr[:i], addr[i+1:]
}

// RedisCluster is a Redis Cluster of masters with one replica each.
type RedisCluster struct {
	Nodes []*Redis
	t     testing.TB
}

// ClusterNodeTimeout is the nodes' cluster-node-timeout: a master that
// does not answer for this long is failed over by its replica, in about
// twice this.
const ClusterNodeTimeout = 1000 * time.Millisecond

// StartRedisCluster starts 2×masters redis-server nodes with
// cluster-enabled, makes them a cluster of masters masters with one replica
// each (redis-cli --cluster create), and waits until every node says the
// cluster is ok and every replica has its master's data.
func StartRedisCluster(t testing.TB, masters int) *RedisCluster {
	t.Helper()
	cli := ToolPath("redis-cli")
	if cli == "" {
		Missing(t, "redis-cli not installed", "redis-tools")
	}
	c := &RedisCluster{t: t}
	args := []string{"--cluster", "create"}
	for range 2 * masters {
		// The bus port, of its own: port+10000 (the default) may be out
		// of range or taken.
		n := StartRedis(t, append([]string{"--cluster-enabled", "yes", "--cluster-port", strconv.Itoa(FreePort(t)),
			"--cluster-node-timeout", strconv.Itoa(int(ClusterNodeTimeout.Milliseconds()))}, noSyncDelay...)...)
		c.Nodes = append(c.Nodes, n)
		args = append(args, n.Addr)
	}
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	out, err := exec.Command(cli, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, n := range c.Nodes {
		Eventually(t, n.Addr+" says the cluster is ok and knows every master's replica", func() bool {
			v, err := n.Do("CLUSTER", "INFO")
			return err == nil && strings.Contains(v, "cluster_state:ok") && c.complete(n, masters)
		})
		if role, err := n.Do("ROLE"); err == nil && strings.HasPrefix(role, "slave\n") {
			WaitReplicated(t, n)
		}
	}
	return c
}

// complete reports whether node sees masters masters serving slots, each
// with one replica, and no node failed.
func (c *RedisCluster) complete(node *Redis, masters int) bool {
	replicas := map[string]int{}
	serving := 0
	for _, n := range c.nodesOf(node) {
		if n.failed {
			return false
		}
		if n.isMaster && len(n.slots) > 0 {
			serving++
		} else if !n.isMaster {
			replicas[n.master]++
		}
	}
	if serving != masters || len(replicas) != masters {
		return false
	}
	for _, k := range replicas {
		if k != 1 {
			return false
		}
	}
	return true
}

// Addrs are every node's host:port.
func (c *RedisCluster) Addrs() []string {
	var out []string
	for _, n := range c.Nodes {
		out = append(out, n.Addr)
	}
	return out
}

// node is the node at addr.
func (c *RedisCluster) node(addr string) *Redis {
	for _, n := range c.Nodes {
		if n.Addr == addr {
			return n
		}
	}
	return nil
}

// clusterNode is one line of CLUSTER NODES.
type clusterNode struct {
	id, addr, master string // master: "-" for a master
	isMaster, failed bool
	slots            [][2]int
}

// nodes is CLUSTER NODES as a live node other than skip sees it.
func (c *RedisCluster) nodes(skip *Redis) []clusterNode {
	for _, n := range c.Nodes {
		if n == skip {
			continue
		}
		if out := c.nodesOf(n); out != nil {
			return out
		}
	}
	return nil
}

// nodesOf is CLUSTER NODES as n sees it; nil when n does not answer.
func (c *RedisCluster) nodesOf(n *Redis) []clusterNode {
	v, err := n.Do("CLUSTER", "NODES")
	if err != nil {
		return nil
	}
	var out []clusterNode
	for line := range strings.SplitSeq(strings.TrimSpace(v), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		cn := clusterNode{id: f[0], addr: addr, master: f[3],
			isMaster: strings.Contains(f[2], "master"), failed: strings.Contains(f[2], "fail")}
		for _, r := range f[8:] {
			lo, hi, ok := strings.Cut(r, "-")
			if !ok {
				hi = lo
			}
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if err1 == nil && err2 == nil {
				cn.slots = append(cn.slots, [2]int{a, b})
			}
		}
		out = append(out, cn)
	}
	return out
}

// slot is key's hash slot.
func (c *RedisCluster) slot(key string) int {
	c.t.Helper()
	for _, n := range c.Nodes {
		if v, err := n.Do("CLUSTER", "KEYSLOT", key); err == nil {
			s, err := strconv.Atoi(v)
			if err == nil {
				return s
			}
		}
	}
	c.t.Fatalf("no node answers CLUSTER KEYSLOT %s", key)
	return 0
}

// MasterOf is the node serving key's slot now, and its replica (nil when
// it has none: a promoted replica whose master died).
func (c *RedisCluster) MasterOf(key string) (master, replica *Redis) {
	c.t.Helper()
	slot := c.slot(key)
	nodes := c.nodes(nil)
	for _, m := range nodes {
		for _, r := range m.slots {
			if slot >= r[0] && slot <= r[1] && m.isMaster {
				master = c.node(m.addr)
				for _, s := range nodes {
					if s.master == m.id {
						replica = c.node(s.addr)
					}
				}
			}
		}
	}
	if master == nil {
		c.t.Fatalf("no master serves slot %d of %s: %+v", slot, key, nodes)
	}
	return master, replica
}

// WaitPromoted waits until replica is a master, every live node but dead
// says the cluster is ok and agrees that replica serves key's slot.
func (c *RedisCluster) WaitPromoted(replica, dead *Redis, key string) {
	c.t.Helper()
	slot := c.slot(key)
	Eventually(c.t, replica.Addr+" takes over slot "+strconv.Itoa(slot), func() bool {
		for _, n := range c.Nodes {
			if n == dead {
				continue
			}
			v, err := n.Do("CLUSTER", "INFO")
			if err != nil || !strings.Contains(v, "cluster_state:ok") {
				return false
			}
		}
		for _, m := range c.nodes(dead) {
			for _, r := range m.slots {
				if slot >= r[0] && slot <= r[1] {
					return m.addr == replica.Addr && m.isMaster
				}
			}
		}
		return false
	})
}

// Do runs a command of one key on the master serving it now.
func (c *RedisCluster) Do(key string, args ...string) (string, error) {
	m, _ := c.MasterOf(key)
	return m.Do(args...)
}
