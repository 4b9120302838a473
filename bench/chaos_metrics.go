package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// promSample is one line of the Prometheus text format.
type promSample struct {
	name   string
	labels map[string]string
	value  float64
}

type promSet []promSample

// parseProm reads the text exposition format (comments skipped; label
// values may hold escaped quotes).
func parseProm(r io.Reader) (promSet, error) {
	var out promSet
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		s := promSample{labels: map[string]string{}}
		rest := line
		if i := strings.IndexAny(line, "{ "); i >= 0 && line[i] == '{' {
			s.name = line[:i]
			j := i + 1
			for j < len(line) && line[j] != '}' {
				eq := strings.IndexByte(line[j:], '=')
				if eq < 0 || j+eq+1 >= len(line) || line[j+eq+1] != '"' {
					return nil, fmt.Errorf("metrics: bad labels in %q", line)
				}
				key := strings.TrimSpace(line[j : j+eq])
				k := j + eq + 2
				var val strings.Builder
				for k < len(line) && line[k] != '"' {
					if line[k] == '\\' && k+1 < len(line) {
						k++
						switch line[k] {
						case 'n':
							val.WriteByte('\n')
						default:
							val.WriteByte(line[k])
						}
					} else {
						val.WriteByte(line[k])
					}
					k++
				}
				s.labels[key] = val.String()
				j = k + 1
				if j < len(line) && line[j] == ',' {
					j++
				}
			}
			rest = line[min(j+1, len(line)):]
		} else if i >= 0 {
			s.name = line[:i]
			rest = line[i:]
		}
		f := strings.Fields(rest)
		if s.name == "" || len(f) == 0 {
			return nil, fmt.Errorf("metrics: bad line %q", line)
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics: bad value in %q", line)
		}
		s.value = v
		out = append(out, s)
	}
	return out, sc.Err()
}

// sum adds the samples of name whose labels include every pair of match
// ("key", "value", ...).
func (ps promSet) sum(name string, match ...string) float64 {
	var t float64
	for _, s := range ps {
		if s.name != name {
			continue
		}
		ok := true
		for i := 0; i+1 < len(match); i += 2 {
			if s.labels[match[i]] != match[i+1] {
				ok = false
				break
			}
		}
		if ok {
			t += s.value
		}
	}
	return t
}

func (ps promSet) has(name string) bool {
	for _, s := range ps {
		if s.name == name {
			return true
		}
	}
	return false
}

// scraper reads l4lb's /metrics, one connection per scrape (no idle
// keep-alive connection to count among l4lb's fds).
type scraper struct {
	url    string
	client *http.Client
}

func newScraper(admin string) *scraper {
	return &scraper{
		url:    "http://" + admin + "/metrics",
		client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}},
	}
}

func (s *scraper) scrape() (promSet, error) {
	resp, err := s.client.Get(s.url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("metrics: %s", resp.Status)
	}
	return parseProm(resp.Body)
}

// resSample is l4lb's resources at one moment.
type resSample struct {
	T           int64   `json:"t_ns"`
	Fds         int     `json:"fds"`
	PipeFds     int     `json:"pipe_fds"` // /proc/PID/fd targets "pipe:[...]"
	SocketFds   int     `json:"socket_fds"`
	RSSKB       float64 `json:"rss_kb"`
	Threads     int     `json:"threads"`
	Goroutines  float64 `json:"goroutines"`
	PipesBusy   float64 `json:"pipes_busy"` // l4lb_splice_pipes
	PipesIdle   float64 `json:"pipes_idle"`
	ConnsActive float64 `json:"connections_active"` // sum of l4lb_connections_active
	ClientsOpen float64 `json:"clients_open"`       // l4lb_client_connections_open
}

// netFds is the fds net of the pooled idle pipes (two fds each), which l4lb
// keeps on purpose (at most 32).
func (r resSample) netFds() int { return r.Fds - 2*int(r.PipesIdle) }

func sampleResources(pid int, s *scraper) (resSample, error) {
	r := resSample{T: time.Now().UnixNano()}
	dir := "/proc/" + strconv.Itoa(pid)
	ents, err := os.ReadDir(dir + "/fd")
	if err != nil {
		return r, err
	}
	for _, e := range ents {
		t, err := os.Readlink(dir + "/fd/" + e.Name())
		if err != nil {
			continue
		}
		r.Fds++
		switch {
		case strings.HasPrefix(t, "pipe:"):
			r.PipeFds++
		case strings.HasPrefix(t, "socket:"):
			r.SocketFds++
		}
	}
	r.RSSKB, _ = fieldKB(dir+"/status", "VmRSS")
	r.Threads = len(threadIDs(pid))
	ps, err := s.scrape()
	if err != nil {
		return r, err
	}
	r.Goroutines = ps.sum("go_goroutines")
	r.PipesBusy = ps.sum("l4lb_splice_pipes", "state", "busy")
	r.PipesIdle = ps.sum("l4lb_splice_pipes", "state", "idle")
	r.ConnsActive = ps.sum("l4lb_connections_active")
	r.ClientsOpen = ps.sum("l4lb_client_connections_open")
	return r, nil
}

// goroutineDump is l4lb's /debug/pprof/goroutine?debug=1: stacks grouped,
// each with its count.
func (s *scraper) goroutineDump() (string, error) {
	resp, err := s.client.Get(strings.TrimSuffix(s.url, "/metrics") + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("pprof: %s", resp.Status)
	}
	return string(b), nil
}

// goroutineGroups parses a debug=1 dump into "stack" -> count, the stack
// named by its functions, innermost first.
func goroutineGroups(dump string) map[string]int {
	out := map[string]int{}
	for _, block := range strings.Split(dump, "\n\n") {
		lines := strings.Split(strings.TrimSpace(block), "\n")
		if len(lines) == 0 {
			continue
		}
		first := lines[0]
		if strings.HasPrefix(first, "goroutine profile:") && len(lines) > 1 {
			lines = lines[1:]
			first = lines[0]
		}
		var n int
		if _, err := fmt.Sscanf(first, "%d @", &n); err != nil {
			continue
		}
		var fns []string
		for _, l := range lines[1:] {
			f := strings.Fields(strings.TrimPrefix(l, "#"))
			if len(f) >= 2 {
				fns = append(fns, f[1])
			}
		}
		out[strings.Join(fns, " < ")] += n
	}
	return out
}

// goroutineGrowth lists the stacks with more goroutines in after than in
// before.
func goroutineGrowth(before, after string) []string {
	b, a := goroutineGroups(before), goroutineGroups(after)
	var out []string
	for k, n := range a {
		if n > b[k] {
			out = append(out, fmt.Sprintf("+%d %s", n-b[k], k))
		}
	}
	sort.Strings(out)
	return out
}
