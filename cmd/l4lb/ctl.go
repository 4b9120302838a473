package main

import (
	"flag"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/l4lb/l4lb/pkg/admin"
)

// l4lb ctl: the admin API from the command line, so operators need neither
// curl nor socat. This file reads the command line into one request of the
// API; ctlclient.go finds the endpoint and sends it, ctlformat.go prints
// the answer.

// ctlOptions are the flags every verb takes.
type ctlOptions struct {
	admin, config, token string
	json                 bool
}

// ctlVerbFlags are the flags of the verbs that take some.
type ctlVerbFlags struct {
	timeout    time.Duration
	timeoutSet bool // the API's default applies otherwise
	weight     int
	weightSet  bool // the API's default applies otherwise
	id         string
	local      bool // scope=local: this instance only, not the fleet
}

// ctlRequest is one verb as a request of the admin API.
type ctlRequest struct {
	verb   string
	method string
	path   string // escaped, with the query
	body   []byte
	args   []string
	flags  ctlVerbFlags
}

// acts says whether the request changes anything, so needs the token.
func (r ctlRequest) acts() bool { return r.method != "GET" }

// ctlVerb is one verb: its arguments, its flags and its request.
type ctlVerb struct {
	args    []string // the positional arguments' names
	flags   []string // of "timeout", "weight", "id", "local"
	about   string
	request func(a []string, f ctlVerbFlags) (method, path string, body []byte)
}

// backendPath is the path of the backend addr of pool, escaped as the API
// wants it ("%5B::1%5D:9001").
func backendPath(pool, addr string) string {
	return "/api/v1/pools/" + url.PathEscape(pool) + "/backends/" + url.PathEscape(addr)
}

// action is the request of a backend action without a parameter.
func action(name string) func([]string, ctlVerbFlags) (string, string, []byte) {
	return func(a []string, _ ctlVerbFlags) (string, string, []byte) {
		return "POST", backendPath(a[0], a[1]) + "/" + name, nil
	}
}

// timeoutQuery is ?timeout=D when -timeout was given.
func timeoutQuery(f ctlVerbFlags) string {
	return withQuery("", f.timeoutSet, "timeout", f.timeout.String())
}

// withQuery adds name=value to the query q ("" or "?..." already) when set.
func withQuery(q string, set bool, name, value string) string {
	switch {
	case !set:
		return q
	case q == "":
		return "?" + name + "=" + url.QueryEscape(value)
	}
	return q + "&" + name + "=" + url.QueryEscape(value)
}

// scopeQuery adds scope=local to q when -local was given.
func scopeQuery(q string, f ctlVerbFlags) string { return withQuery(q, f.local, "scope", "local") }

var ctlVerbs = map[string]ctlVerb{
	"pools": {about: "every pool and its backends",
		request: func([]string, ctlVerbFlags) (string, string, []byte) { return "GET", "/api/v1/pools", nil }},
	"pool": {args: []string{"POOL"}, about: "one pool and its backends",
		request: func(a []string, _ ctlVerbFlags) (string, string, []byte) {
			return "GET", "/api/v1/pools/" + url.PathEscape(a[0]), nil
		}},
	"disable": {args: []string{"POOL", "ADDR"}, about: "disable the backend by hand: no new clients until enable", request: action("disable")},
	"enable": {args: []string{"POOL", "ADDR"}, flags: []string{"local"},
		about: "undo a disable or a drain (a fleet's on every instance; with -local, this instance's own drain only); an open breaker probes at once",
		request: func(a []string, f ctlVerbFlags) (string, string, []byte) {
			return "POST", backendPath(a[0], a[1]) + "/enable" + scopeQuery("", f), nil
		}},
	"probe": {args: []string{"POOL", "ADDR"}, about: "ask the backend's open breaker for its recovery probe now", request: action("probe")},
	"drain": {args: []string{"POOL", "ADDR"}, flags: []string{"timeout", "local"},
		about: "no new clients at once; the connections still open at the timeout (default " + admin.DefaultDrainTimeout.String() + ") are reset; on every instance of a fleet unless -local",
		request: func(a []string, f ctlVerbFlags) (string, string, []byte) {
			return "POST", backendPath(a[0], a[1]) + "/drain" + scopeQuery(timeoutQuery(f), f), nil
		}},
	"weight": {args: []string{"POOL", "ADDR", "N"}, flags: []string{"local"}, about: "the weight new picks use, 0..256; on every instance of a fleet unless -local",
		request: func(a []string, f ctlVerbFlags) (string, string, []byte) {
			return "POST", backendPath(a[0], a[1]) + "/weight" + scopeQuery("?value="+url.QueryEscape(a[2]), f), nil
		}},
	"add": {args: []string{"POOL", "ADDR"}, flags: []string{"weight", "id"},
		about: "add a backend at run time; it takes clients once its health checks pass",
		request: func(a []string, f ctlVerbFlags) (string, string, []byte) {
			body := `{"addr":` + strconv.Quote(a[1])
			if f.weightSet {
				body += `,"weight":` + strconv.Itoa(f.weight)
			}
			if f.id != "" {
				body += `,"id":` + strconv.Quote(f.id)
			}
			return "POST", "/api/v1/pools/" + url.PathEscape(a[0]) + "/backends", []byte(body + "}")
		}},
	"remove": {args: []string{"POOL", "ADDR"}, flags: []string{"timeout"},
		about: "drain a backend added at run time (connections open at the timeout, default " + admin.DefaultDrainTimeout.String() + ", are reset) and remove it",
		request: func(a []string, f ctlVerbFlags) (string, string, []byte) {
			return "DELETE", backendPath(a[0], a[1]) + timeoutQuery(f), nil
		}},
	"fleet-replace": {args: []string{"POOL"},
		about: "in a fleet, write the backends this instance's API added to POOL over the fleet's record of them, only when that record is unreadable (an add or remove answered 502)",
		request: func(a []string, _ ctlVerbFlags) (string, string, []byte) {
			return "POST", "/api/v1/pools/" + url.PathEscape(a[0]) + "/fleet-members/replace", nil
		}},
	"reload": {about: "re-read the configuration file and apply it",
		request: func([]string, ctlVerbFlags) (string, string, []byte) { return "POST", "/api/v1/reload", nil }},
}

// ctlVerbOrder is the order usage lists the verbs in.
var ctlVerbOrder = []string{"pools", "pool", "disable", "enable", "probe", "drain", "weight", "add", "remove", "fleet-replace", "reload"}

const ctlSynopsis = "[-admin ADDR] [-config FILE] [-token T] [-json] VERB [ARGS]"

// ctlAbout is ctl's usage text after the synopsis: every verb.
func ctlAbout() string {
	var b strings.Builder
	b.WriteString("Drive the admin API of a running l4lb. Verbs:\n")
	for _, name := range ctlVerbOrder {
		fmt.Fprintf(&b, "  %-38s %s\n", ctlVerbSynopsis(name), ctlVerbs[name].about)
	}
	b.WriteString("\nThe endpoint is -admin, else [admin] listen of -config FILE; the token is -token,\n" +
		"else the content of the file's [admin] token_file. Exit status: 0 done, 1 the API\n" +
		"refused or could not be reached, 2 a bad command line.")
	return b.String()
}

// ctlVerbSynopsis is "drain POOL ADDR [-timeout D]".
func ctlVerbSynopsis(name string) string {
	v := ctlVerbs[name]
	parts := append([]string{name}, v.args...)
	for _, f := range v.flags {
		parts = append(parts, map[string]string{"timeout": "[-timeout D]", "weight": "[-weight N]", "id": "[-id ID]", "local": "[-local]"}[f])
	}
	return strings.Join(parts, " ")
}

// ctlGlobalFlags puts the flags every verb takes on fs.
func ctlGlobalFlags(fs *flag.FlagSet, o *ctlOptions) {
	fs.StringVar(&o.admin, "admin", o.admin, "the admin endpoint's `ADDR` (IP:port); default: [admin] listen of -config")
	fs.StringVar(&o.config, "config", o.config, "the configuration `FILE` the running l4lb uses: where its admin endpoint and token are")
	fs.StringVar(&o.token, "token", o.token, "the admin token `T`; default: the content of -config's [admin] token_file")
	fs.BoolVar(&o.json, "json", o.json, "print the API's JSON as it comes, for scripts")
}

// parseCtl reads ctl's command line. done says the command ended before
// any request with code: help asked for (0) or a bad command line (2,
// said on stderr).
func parseCtl(args []string, stdout, stderr io.Writer) (o ctlOptions, req ctlRequest, code int, done bool) {
	fs := newFlagSet("ctl", ctlSynopsis, ctlAbout(), stderr)
	ctlGlobalFlags(fs, &o)
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return o, req, code, true
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "ctl: give a verb")
		fs.Usage()
		return o, req, 2, true
	}
	req.verb = fs.Arg(0)
	verb, ok := ctlVerbs[req.verb]
	if !ok {
		fmt.Fprintf(stderr, "ctl: unknown verb %q: use one of %s\n", req.verb, strings.Join(ctlVerbOrder, ", "))
		return o, req, 2, true
	}
	vfs := newFlagSet("ctl "+req.verb, strings.TrimPrefix(ctlVerbSynopsis(req.verb), req.verb+" "), verb.about, stderr)
	// The flags every verb takes are welcome after the verb too
	// ("l4lb ctl pools -json").
	ctlGlobalFlags(vfs, &o)
	if slices.Contains(verb.flags, "timeout") {
		vfs.Func("timeout", "the drain's timeout `D` (e.g. 1m); default: the API's ("+admin.DefaultDrainTimeout.String()+")", func(s string) error {
			d, err := time.ParseDuration(s)
			if err != nil || d < 0 {
				return fmt.Errorf("%q is not a duration >= 0 such as 30s", s)
			}
			req.flags.timeout, req.flags.timeoutSet = d, true
			return nil
		})
	}
	if slices.Contains(verb.flags, "weight") {
		vfs.Func("weight", "the backend's weight `N`, 0..256; default: the API's (1)", func(s string) error {
			n, err := strconv.Atoi(s)
			if err != nil {
				return fmt.Errorf("%q is not an integer", s)
			}
			req.flags.weight, req.flags.weightSet = n, true
			return nil
		})
	}
	if slices.Contains(verb.flags, "local") {
		vfs.BoolVar(&req.flags.local, "local", false, "this instance only (scope=local): in a fleet, the other instances are left as they are")
	}
	if slices.Contains(verb.flags, "id") {
		vfs.StringVar(&req.flags.id, "id", "", "the backend's hashing identity `ID`; default: its address")
	}
	// Flags may come between the arguments, as people write them.
	rest := fs.Args()[1:]
	for {
		if code, done := parseFlags(vfs, rest, stdout, stderr); done {
			return o, req, code, true
		}
		if vfs.NArg() == 0 {
			break
		}
		req.args = append(req.args, vfs.Arg(0))
		rest = vfs.Args()[1:]
	}
	if len(req.args) != len(verb.args) {
		takes := "no arguments"
		if len(verb.args) > 0 {
			takes = fmt.Sprintf("%d arguments (%s)", len(verb.args), strings.Join(verb.args, " "))
		}
		fmt.Fprintf(stderr, "ctl: %s takes %s, not %d: l4lb ctl %s\n", req.verb, takes, len(req.args), ctlVerbSynopsis(req.verb))
		return o, req, 2, true
	}
	if req.verb == "weight" {
		if _, err := strconv.Atoi(req.args[2]); err != nil {
			fmt.Fprintf(stderr, "ctl: weight %q is not an integer (0..256)\n", req.args[2])
			return o, req, 2, true
		}
	}
	req.method, req.path, req.body = verb.request(req.args, req.flags)
	return o, req, 0, false
}

// cmdCtl runs l4lb ctl.
func cmdCtl(args []string, stdout, stderr io.Writer) int {
	o, req, code, done := parseCtl(args, stdout, stderr)
	if done {
		return code
	}
	c, err := newCtlClient(o, req.acts())
	if err != nil {
		fmt.Fprintf(stderr, "ctl: %v\n", err)
		return ctlUsageOr(err)
	}
	status, body, err := c.do(req)
	if err != nil {
		fmt.Fprintf(stderr, "ctl: %v\n", err)
		return 1
	}
	if o.json {
		stdout.Write(body)
	}
	if status/100 != 2 {
		printAPIError(stderr, status, body)
		return 1
	}
	if o.json {
		return 0
	}
	if err := showCtl(stdout, req, body); err != nil {
		fmt.Fprintf(stderr, "ctl: the API's answer (%d) does not read as l4lb's: %v\n", status, err)
		return 1
	}
	return 0
}
