package fleet

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/l4lb/l4lb/pkg/breaker"
)

// redisStore is breaker.Store on Redis, with no fallback: every error is
// the caller's to handle (Store falls back to its local copy).
type redisStore struct {
	client rueidis.Client
	ks     keyspace
	// cacheTTL bounds how long a client-side cached membership read may
	// be served without the server (membersredis.go).
	cacheTTL time.Duration
	// replicaWait, when above 0 (a Sentinel set, a Cluster), is how long
	// a probe lock waits to reach a replica (AcquireProbe), on locks.
	replicaWait time.Duration
	// locks, with replicaWait, is a client of its own for the probe lock's
	// SET and WAIT: WAIT blocks, and rueidis sends blocking commands on
	// pooled connections of their own, which on the main client would
	// each be tracked (every write told to each of them, their closing
	// taken for a reconnect) and kept, pinging, for good. This one caches
	// nothing, tracks nothing and lets idle connections go.
	locks rueidis.Client

	mu       sync.Mutex
	ownWrite map[string]time.Time // keys written here lately: read past the cache
}

// cacheBackstop bounds how long a cached read of a breaker's keys is
// served without the server, should an invalidation ever be lost. With
// broadcast tracking none is lost while the connection lives, and a
// reconnect drops the whole cache, so this is defence in depth; each
// entry lives a random time between half of it and all of it, so the
// fleet's re-reads spread evenly instead of arriving together.
const cacheBackstop = 30 * time.Minute

// backstop is one cached entry's lifetime.
func backstop() time.Duration {
	return cacheBackstop/2 + rand.N(cacheBackstop/2)
}

// ownWriteWindow is how long reads of a key this instance wrote skip the
// client-side cache. The server's invalidation of our own write travels
// behind the write's reply, so a read made at once could still be served
// the old value; the breaker re-reads right after its own writes (a
// disable must show at once, rule 5) and must see them.
//
// Such reads still go through the cache first, their answers unused: the
// write's invalidation drops the cached entries, and the cached read
// fills them again for the reads after the window.
const ownWriteWindow = time.Second

func (r *redisStore) wrote(key string) {
	r.mu.Lock()
	if r.ownWrite == nil {
		r.ownWrite = map[string]time.Time{}
	}
	r.ownWrite[key] = time.Now().Add(ownWriteWindow)
	r.mu.Unlock()
}

func (r *redisStore) justWrote(key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	until, ok := r.ownWrite[key]
	if ok && time.Now().After(until) {
		delete(r.ownWrite, key)
		return false
	}
	return ok
}

var _ breaker.Store = (*redisStore)(nil)

// errBadReply is wrapped by the error of an answer from Redis that does
// not decode: a key holding what no instance writes.
var errBadReply = errors.New("cluster store: unexpected reply")

// unreachable reports whether err, from a Redis operation, means the fleet
// cannot decide through Redis now, so the Store decides locally: no answer
// (a connection lost, refused or timed out, a client closing), or an
// answer that refuses every write or every command for a while (loading
// its data, a script running too long, out of memory, a disk error, a
// replica or a cluster without a master, authentication lost). Any other
// error reply, such as WRONGTYPE or a script failing on what a key holds,
// and an answer that does not decode, are about one operation and the
// keys it touched: the operation fails, and the instance stays with the
// fleet. NOSCRIPT never gets here: rueidis sends the script itself when
// the server does not know its SHA1, which loads it again.
func unreachable(err error) bool {
	if errors.Is(err, errBadReply) || rueidis.IsParseErr(err) || rueidis.IsRedisNil(err) {
		return false
	}
	rerr, ok := rueidis.IsRedisErr(err)
	if !ok {
		return true
	}
	code, _, _ := strings.Cut(rerr.Error(), " ")
	switch code {
	case "LOADING", "BUSY", "OOM", "MISCONF", "READONLY", "MASTERDOWN", "NOREPLICAS",
		"CLUSTERDOWN", "TRYAGAIN", "MOVED", "ASK", "NOAUTH", "WRONGPASS":
		return true
	}
	return false
}

// readScript reads the state in one consistent step, bypassing the
// client-side cache (Store uses it right after its own writes).
var readScript = rueidis.NewLuaScriptReadOnly(stateLua + `return state(1)`)

// Read implements breaker.Store. A closed breaker, the common case, is
// answered from the client-side cache (GET of the counter, the open entry
// and the disable): the server tells this client of every write to a
// fleet key (broadcast tracking), which drops the entry, so an entry is
// good until then, or until its backstop runs out. None of those keys has
// a TTL in Redis, so the entry's lifetime is ours to give (ToStaticTTL: no
// PTTL round trip with each fill). An open one is read from the server in
// one script: its cooldown left is the cooldown key's TTL there (Store
// keeps that answer until the key changes or the cooldown runs out).
func (r *redisStore) Read(ctx context.Context, key string) (breaker.State, error) {
	ttl := backstop()
	cmds := []rueidis.CacheableTTL{
		rueidis.CT(r.client.B().Get().Key(r.ks.key(key, fieldGen)).Cache().ToStaticTTL(), ttl),
		rueidis.CT(r.client.B().Get().Key(r.ks.key(key, fieldOpen)).Cache().ToStaticTTL(), ttl),
		rueidis.CT(r.client.B().Get().Key(r.ks.key(key, fieldDisabled)).Cache().ToStaticTTL(), ttl),
	}
	res := r.client.DoMultiCache(ctx, cmds...)
	var vals [3]string
	var present [3]bool
	for i, rr := range res {
		v, err := rr.ToString()
		switch {
		case rueidis.IsRedisNil(err):
		case err != nil:
			return breaker.State{}, err
		default:
			vals[i], present[i] = v, true
		}
	}
	if present[1] || r.justWrote(key) {
		return r.readFresh(ctx, key)
	}
	st := breaker.State{Disabled: present[2]}
	if present[0] {
		g, err := strconv.ParseUint(vals[0], 10, 64)
		if err != nil {
			return breaker.State{}, fmt.Errorf("%w: %s: %w", errBadReply, r.ks.key(key, fieldGen), err)
		}
		st.Generation = g
	}
	return st, nil
}

// readFresh reads the state from the server, never the cache.
func (r *redisStore) readFresh(ctx context.Context, key string) (breaker.State, error) {
	st, _, err := decodeState(readScript.Exec(ctx, r.client, r.ks.state(key), nil))
	return st, err
}

// decodeState reads a script's {ok, generation, open, cooldown_ms,
// cooldown_left_ms, disabled}.
func decodeState(rr rueidis.RedisResult) (breaker.State, bool, error) {
	st, ok, err := decodeStateCode(rr)
	return st, ok == 1, err
}

// decodeStateCode is decodeState with ok as the script answered it (0 or
// 1, and 2 for voteScript's vote below the quorum).
func decodeStateCode(rr rueidis.RedisResult) (breaker.State, int64, error) {
	arr, err := rr.ToArray()
	if err != nil {
		return breaker.State{}, 0, err
	}
	if len(arr) != 6 {
		return breaker.State{}, 0, fmt.Errorf("%w: state script answered %d values, want 6", errBadReply, len(arr))
	}
	var n [6]int64
	for i := range arr {
		if n[i], err = arr[i].AsInt64(); err != nil {
			return breaker.State{}, 0, fmt.Errorf("%w: state script value %d: %w", errBadReply, i, err)
		}
	}
	st := breaker.State{Generation: uint64(n[1]), Open: n[2] == 1, Disabled: n[5] == 1}
	if st.Open {
		st.Cooldown = time.Duration(n[3]) * time.Millisecond
		st.CooldownLeft = time.Duration(n[4]) * time.Millisecond
	}
	return st, n[0], nil
}

func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

// Trip implements breaker.Store.
func (r *redisStore) Trip(ctx context.Context, key string, seen uint64, cooldown, ttl time.Duration) (breaker.State, bool, error) {
	defer r.wrote(key)
	return decodeState(tripScript.Exec(ctx, r.client, r.ks.state(key),
		[]string{strconv.FormatUint(seen, 10), ms(cooldown), ms(ttl)}))
}

// Close implements breaker.Store.
func (r *redisStore) Close(ctx context.Context, key string, gen uint64) (breaker.State, bool, error) {
	defer r.wrote(key)
	return decodeState(closeScript.Exec(ctx, r.client, r.ks.voting(key), []string{strconv.FormatUint(gen, 10)}))
}

// Reopen implements breaker.Store.
func (r *redisStore) Reopen(ctx context.Context, key string, gen uint64, cooldown, ttl time.Duration) (breaker.State, bool, error) {
	defer r.wrote(key)
	return decodeState(reopenScript.Exec(ctx, r.client, r.ks.state(key),
		[]string{strconv.FormatUint(gen, 10), ms(cooldown), ms(ttl)}))
}

// AcquireProbe implements breaker.Store: SET NX PX with the owner's token.
// With replicas (Sentinel, Cluster), the lock is waited onto one of them
// (WAIT 1, at most replicaWait) before the probe may start: replication
// is asynchronous, and a lock the master took but no replica had when it
// died would let another instance take it again on the promoted replica
// and probe the same generation beside this one. WAIT's answer is not
// checked: with every replica down the lock still holds on the master,
// and probes must go on.
func (r *redisStore) AcquireProbe(ctx context.Context, key, owner string, ttl time.Duration) (bool, error) {
	set := r.client.B().Set().Key(r.ks.key(key, fieldProbe)).Value(owner).
		Nx().PxMilliseconds(max(ttl.Milliseconds(), 1)).Build()
	var err error
	if r.replicaWait <= 0 {
		err = r.client.Do(ctx, set).Error()
	} else {
		// One connection for both, so that WAIT counts the SET (a keyless
		// command goes with its neighbour's slot on a cluster).
		wait := r.client.B().Wait().Numreplicas(1).Timeout(max(r.replicaWait.Milliseconds(), 1)).Build()
		err = r.locks.DoMulti(ctx, set, wait)[0].Error()
	}
	if rueidis.IsRedisNil(err) {
		return false, nil // NX: someone holds it
	}
	return err == nil, err
}

// ReleaseProbe implements breaker.Store: only the owner's token deletes.
func (r *redisStore) ReleaseProbe(ctx context.Context, key, owner string) error {
	return releaseScript.Exec(ctx, r.client, []string{r.ks.key(key, fieldProbe)}, []string{owner}).Error()
}

// retakeProbe takes key's probe lock for owner for ttl if it is free or
// the owner's already (retakeScript): at a rejoin, a probe begun apart
// may find the lock of the owner's earlier probe still in Redis.
func (r *redisStore) retakeProbe(ctx context.Context, key, owner string, ttl time.Duration) (bool, error) {
	n, err := retakeScript.Exec(ctx, r.client, []string{r.ks.key(key, fieldProbe)}, []string{owner, ms(ttl)}).AsInt64()
	return n == 1, err
}

// Disable implements breaker.Store.
func (r *redisStore) Disable(ctx context.Context, key string) error {
	defer r.wrote(key)
	return r.client.Do(ctx, r.client.B().Set().Key(r.ks.key(key, fieldDisabled)).Value("1").Build()).Error()
}

// Enable implements breaker.Store.
func (r *redisStore) Enable(ctx context.Context, key string) error {
	defer r.wrote(key)
	return r.client.Do(ctx, r.client.B().Del().Key(r.ks.key(key, fieldDisabled)).Build()).Error()
}

// mergeMode is which keys a merge writes (mergeScript's ARGV[6]).
type mergeMode string

const (
	// mergeApart: a key decided on locally while apart, always.
	mergeApart mergeMode = "apart"
	// mergeLost: after Redis lost its data, where Redis is behind the
	// local copy, or holds no disable the copy holds (a replica that
	// missed only the disable).
	mergeLost mergeMode = "lost"
	// mergeBehind: a key a read found behind (catchUp), only where Redis's
	// generation still is below the copy's: any merge since (a crossing
	// one, another instance's) raised it above, and an operator's enable
	// made after that merge is then not undone by a copy read before it.
	mergeBehind mergeMode = "behind"
)

// merge applies the reconcile rule to key with the local copy's state,
// where mode says. ok reports whether Redis changed.
func (r *redisStore) merge(ctx context.Context, key string, local breaker.State, mode mergeMode) (breaker.State, bool, error) {
	defer r.wrote(key)
	flag := func(b bool) string {
		if b {
			return "1"
		}
		return "0"
	}
	return decodeState(mergeScript.Exec(ctx, r.client, r.ks.voting(key), []string{
		strconv.FormatUint(local.Generation, 10), flag(local.Open), ms(local.Cooldown), ms(local.CooldownLeft), flag(local.Disabled), string(mode),
	}))
}

// mark sets the fleet's marker key to token if it is absent and returns
// the marker's value: which copy of the fleet's data this Redis holds. On
// a Redis that had a marker before, an absent one (this token answered) or
// another one than an instance saw last means the data is gone (a restart
// without persistence, a flush, a failover to an empty replica), so the
// local copies must be written back (Store.mark).
func (r *redisStore) mark(ctx context.Context, token string) (string, error) {
	return markScript.Exec(ctx, r.client, []string{r.ks.prefix + "fleet"}, []string{token}).ToString()
}

// ping is one round trip, for the store's health.
func (r *redisStore) ping(ctx context.Context) error {
	return r.client.Do(ctx, r.client.B().Ping().Build()).Error()
}
