package splice

// The benchmarks' view of the pool (pipe_bench_test.go): each goroutine
// is a loop, with a cache of its own.
func benchPipes(pool *PipePool) (get func() *pipe, put func(*pipe), done func()) {
	c := pool.NewCache()
	return c.get, c.put, c.Close
}

func benchScratchDone(sc *Scratch) { sc.Close() }
