package config

import (
	_ "embed"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// referenceHead is the hand-written part of docs/configuration.md: the
// principles every key follows, and the checks that look at several.
//
//go:embed reference_head.md
var referenceHead string

// ReferencePath is where the generated reference is committed, from the
// repository's root.
const ReferencePath = "docs/configuration.md"

// Reference renders docs/configuration.md: the hand-written principles,
// then every table of the schema with each key's type, default, allowed
// values and meaning. `go generate ./pkg/config` writes it; a test fails
// when the committed file differs.
func Reference() []byte {
	var b strings.Builder
	b.WriteString(referenceHead)
	for _, sec := range schema {
		fmt.Fprintf(&b, "\n## `%s`\n\n%s\n", sec.Header(), sec.Meaning)
		if len(sec.Keys) == 0 {
			continue
		}
		b.WriteString("\n| Key | Type | Default | Allowed | Meaning |\n|---|---|---|---|---|\n")
		for _, k := range sec.Keys {
			meaning := k.Meaning
			if k.Only != "" {
				meaning = "*" + strings.ToUpper(k.Only) + " only.* " + meaning
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", k.Name, k.Kind, cell(defaultText(k)), cell(allowedText(k)), cell(meaning))
		}
	}
	return []byte(b.String())
}

// cell escapes s for a Markdown table cell.
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// defaultText writes a key's default as the file would write it.
func defaultText(k Key) string {
	if k.Default == nil {
		return "none"
	}
	return "`" + tomlValue(k.Kind, k.Default) + "`"
}

// tomlValue writes v, a value of kind, as TOML.
func tomlValue(kind Kind, v any) string {
	switch x := v.(type) {
	case string:
		return strconv.Quote(x)
	case []string:
		q := make([]string, len(x))
		for i, s := range x {
			q[i] = strconv.Quote(s)
		}
		return "[" + strings.Join(q, ", ") + "]"
	case int:
		return strconv.Itoa(x)
	case float64:
		f := strconv.FormatFloat(x, 'f', -1, 64)
		if !strings.ContainsAny(f, ".e") {
			f += ".0" // a TOML float, not an integer
		}
		return f
	case bool:
		return strconv.FormatBool(x)
	case time.Duration:
		if x == 0 && kind == KindDurationOff {
			return `"off"`
		}
		return strconv.Quote(durationText(x))
	}
	panic(fmt.Sprintf("config: no TOML form for %T", v))
}

// durationText is d as a person writes it: "2m", not "2m0s".
func durationText(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// allowedText says which values a key takes: its values, its range (with
// what 0 means, when 0 is allowed below the range) and its rule.
func allowedText(k Key) string {
	var parts []string
	switch {
	case len(k.Values) > 0:
		q := make([]string, len(k.Values))
		for i, v := range k.Values {
			q[i] = "`" + v + "`"
		}
		parts = append(parts, strings.Join(q, ", "))
	case k.Kind == KindInteger:
		lo, hi := k.intRange()
		parts = append(parts, rangeWords(strconv.Itoa(lo), strconv.Itoa(hi), hi == math.MaxInt))
	case k.Kind == KindDuration || k.Kind == KindDurationOff:
		lo, hi := k.durationRange()
		r := rangeWords(durationText(lo), durationText(hi), hi == MaxDuration)
		switch {
		case k.Kind == KindDurationOff:
			r = "`\"off\"` or " + r
		case k.Zero != "":
			r = "`\"0s\"` (" + k.Zero + ") or " + r
		}
		parts = append(parts, r)
	case k.Kind == KindFloat && k.Min != nil:
		lo, hi := k.floatRange()
		parts = append(parts, rangeWords(strconv.FormatFloat(lo, 'f', -1, 64), strconv.FormatFloat(hi, 'f', -1, 64), false))
	}
	if k.Rule != "" {
		parts = append(parts, k.Rule)
	}
	return strings.Join(parts, "; ")
}

func rangeWords(lo, hi string, floorOnly bool) string {
	if floorOnly {
		return "at least " + lo
	}
	return lo + ".." + hi
}
