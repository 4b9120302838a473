package config

import (
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
)

// table reads the keys of one decoded TOML table into typed fields. Every
// read marks its key as known; done reports the keys nobody asked for. A
// key of the wrong type or out of range is reported and leaves the default
// in place, so the walk goes on and every problem is found in one run.
type table struct {
	c   *collector
	key string // canonical key of the table itself ("" for the root)
	// path is the table's Section.Path in the schema, where the bounds
	// and allowed values of its keys are: "pool.NAME" for pool.web.
	path  string
	m     map[string]any
	known []string
}

func newTable(c *collector, key, path string, m map[string]any) *table {
	return &table{c: c, key: key, path: path, m: m}
}

// spec is the schema's entry for name in this table.
func (t *table) spec(name string) *Key { return spec(t.path, name) }

// childPath is the schema path of the table name inside this one.
func (t *table) childPath(name string) string {
	switch t.path {
	case "":
		return name
	case "pool":
		return poolPath // every pool's name stands for NAME
	}
	return t.path + "." + name
}

// keyOf is the canonical key of name inside this table.
func (t *table) keyOf(name string) string { return joinKey(t.key, name) }

// get returns the raw value of name, marking it known.
func (t *table) get(name string) (any, bool) {
	if !slices.Contains(t.known, name) {
		t.known = append(t.known, name)
	}
	v, ok := t.m[name]
	return v, ok
}

// written reports whether the file sets name.
func (t *table) written(name string) bool {
	_, ok := t.m[name]
	return ok
}

// writtenOr returns name when the file sets it, else other: a conflict
// between two keys is reported where the operator wrote one of them.
func (t *table) writtenOr(name, other string) string {
	if _, ok := t.m[name]; ok {
		return name
	}
	return other
}

// require reports name as missing unless it is set.
func (t *table) require(name, what string) bool {
	if _, ok := t.m[name]; ok {
		return true
	}
	t.c.add(t.keyOf(name), "required key is missing: %s", what)
	return false
}

// str reads a string, reporting whether one was set from the file.
func (t *table) str(name string, dst *string) bool {
	v, ok := t.get(name)
	if !ok {
		return false
	}
	s, ok := v.(string)
	if !ok {
		t.c.add(t.keyOf(name), "must be a string, not %s", describe(v))
		return false
	}
	*dst = s
	return true
}

// strs reads an array of strings, reporting whether one was set from the
// file and every element is a string (an element that is not is reported
// at its own key, name[i]).
func (t *table) strs(name string, dst *[]string) bool {
	v, ok := t.get(name)
	if !ok {
		return false
	}
	elems, ok := v.([]any)
	if !ok {
		t.c.add(t.keyOf(name), "must be an array of strings such as [\"a\", \"b\"], not %s", describe(v))
		return false
	}
	out := make([]string, 0, len(elems))
	for i, e := range elems {
		s, ok := e.(string)
		if !ok {
			t.c.add(indexKey(t.keyOf(name), i), "must be a string, not %s", describe(e))
			continue
		}
		out = append(out, s)
	}
	if len(out) != len(elems) {
		return false
	}
	*dst = out
	return true
}

// oneOf reads a string that must be one of the schema's values for it;
// what names such a value in messages. Like integer, it reports false
// only for a present but unusable value.
func (t *table) oneOf(name string, dst *string, what string) bool {
	allowed := t.spec(name).Values
	var s string
	if !t.str(name, &s) {
		_, set := t.m[name]
		return !set
	}
	if !slices.Contains(allowed, s) {
		t.c.add(t.keyOf(name), "%q is not a %s; use one of: %s", s, what, strings.Join(allowed, ", "))
		return false
	}
	*dst = s
	return true
}

// misplaced reports name, when the file sets it although it does not apply
// here (applies is false: a key of the other protocol, say), with the
// message format, and marks it known. It returns true when it reported, so
// the caller skips reading a value that would mean nothing.
func (t *table) misplaced(name string, applies bool, format string, args ...any) bool {
	if _, set := t.m[name]; applies || !set {
		return false
	}
	t.get(name)
	t.c.add(t.keyOf(name), format, args...)
	return true
}

// bytes reads a byte string written either as text (name) or as hex digits
// (hexName), at most one of them; nil when neither is set or the value is
// empty. Set where it does not apply (applies false), each is reported with
// the message notHere. ok is false when a value is present but unusable.
func (t *table) bytes(name, hexName string, applies bool, notHere string) (b []byte, ok bool) {
	textMisplaced := t.misplaced(name, applies, "%s", notHere)
	hexMisplaced := t.misplaced(hexName, applies, "%s", notHere)
	if textMisplaced || hexMisplaced {
		return nil, false
	}
	_, hasText := t.get(name)
	_, hasHex := t.get(hexName)
	var s string
	switch {
	case hasText && hasHex:
		t.c.add(t.keyOf(hexName), "set beside %s: %s and %s are two ways to write the same bytes; keep one", name, name, hexName)
		return nil, false
	case hasText:
		if !t.str(name, &s) {
			return nil, false
		}
		b = []byte(s)
	case hasHex:
		if !t.str(hexName, &s) {
			return nil, false
		}
		d, err := hex.DecodeString(s)
		if err != nil {
			t.c.add(t.keyOf(hexName), "%q is not hex bytes (%s): write two hex digits per byte, e.g. \"70696e67\" for \"ping\"", s, strings.TrimPrefix(err.Error(), "encoding/hex: "))
			return nil, false
		}
		b = d
	}
	if len(b) == 0 {
		b = nil
	}
	return b, true
}

// integer reads a whole number in the schema's range for it. It reports
// false only when the key is present but unusable (and reported), so that
// checks across keys can skip values that are already known to be wrong.
func (t *table) integer(name string, dst *int) bool {
	lo, hi := t.spec(name).intRange()
	v, ok := t.get(name)
	if !ok {
		return true
	}
	n, ok := v.(int64)
	if !ok {
		t.c.add(t.keyOf(name), "must be an integer, not %s", describe(v))
		return false
	}
	if n < int64(lo) || n > int64(hi) {
		t.c.add(t.keyOf(name), "%d is out of range: %s", n, rangeText(lo, hi))
		return false
	}
	*dst = int(n)
	return true
}

// number reads a finite float; an integer is accepted too, since writing
// "0" for 0.0 is no mistake. Like integer, it reports false only for a
// present but unusable value.
func (t *table) number(name string, dst *float64) bool {
	v, ok := t.get(name)
	if !ok {
		return true
	}
	var f float64
	switch x := v.(type) {
	case float64:
		f = x
	case int64:
		f = float64(x)
	default:
		t.c.add(t.keyOf(name), "must be a number, not %s", describe(v))
		return false
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		t.c.add(t.keyOf(name), "must be a finite number, not %v", f)
		return false
	}
	*dst = f
	return true
}

func (t *table) boolean(name string, dst *bool) {
	v, ok := t.get(name)
	if !ok {
		return
	}
	b, ok := v.(bool)
	if !ok {
		t.c.add(t.keyOf(name), "must be true or false, not %s", describe(v))
		return
	}
	*dst = b
}

// anyDuration reads a duration string, refusing a negative one (and with
// positive set, zero); durationIn applies the key's range.
func (t *table) anyDuration(name string, dst *time.Duration, positive bool) bool {
	v, ok := t.get(name)
	if !ok {
		return true
	}
	s, ok := v.(string)
	if !ok {
		t.c.add(t.keyOf(name), "must be a duration string such as \"2s\", not %s", describe(v))
		return false
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		t.c.add(t.keyOf(name), "%q is not a duration: use a number with a unit (ms, s, m, h), e.g. \"2s\" or \"1m30s\"", s)
		return false
	}
	switch {
	case d < 0:
		t.c.add(t.keyOf(name), "%q is negative", s)
		return false
	case d == 0 && positive:
		t.c.add(t.keyOf(name), "must be greater than zero")
		return false
	}
	*dst = d
	return true
}

// sub returns the nested table name, or nil when it is absent or not a
// table (which is reported).
func (t *table) sub(name string) *table {
	v, ok := t.get(name)
	if !ok {
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		t.c.add(t.keyOf(name), "must be a table [%s], not %s", t.keyOf(name), describe(v))
		return nil
	}
	return newTable(t.c, t.keyOf(name), t.childPath(name), m)
}

// tables returns the elements of the array of tables name, each with its
// canonical key; nil when absent or of the wrong shape (which is reported).
func (t *table) tables(name string) []*table {
	v, ok := t.get(name)
	if !ok {
		return nil
	}
	key := t.keyOf(name)
	var elems []any
	switch x := v.(type) {
	case []map[string]any:
		for _, m := range x {
			elems = append(elems, m)
		}
	case []any:
		elems = x
	case map[string]any:
		t.c.add(key, "must be an array of tables: write [[%s]], with double brackets", key)
		return nil
	default:
		t.c.add(key, "must be an array of tables [[%s]], not %s", key, describe(v))
		return nil
	}
	out := make([]*table, 0, len(elems))
	for i, e := range elems {
		m, ok := e.(map[string]any)
		if !ok {
			t.c.add(indexKey(key, i), "must be a table, not %s", describe(e))
			continue
		}
		out = append(out, newTable(t.c, indexKey(key, i), t.childPath(name), m))
	}
	return out
}

// done reports every key of the table that no read asked for.
func (t *table) done() {
	names := make([]string, 0, len(t.m))
	for name := range t.m {
		if !slices.Contains(t.known, name) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		if guess := closest(name, t.known); guess != "" {
			t.c.add(t.keyOf(name), "unknown key (did you mean %q?)", guess)
			continue
		}
		where := "here"
		if t.key != "" {
			where = "in " + t.key
		}
		t.c.add(t.keyOf(name), "unknown key; allowed %s: %s", where, strings.Join(t.known, ", "))
	}
}

func rangeText(lo, hi int) string {
	if hi == math.MaxInt || hi == math.MaxInt64 {
		return fmt.Sprintf("must be at least %d", lo)
	}
	return fmt.Sprintf("must be between %d and %d", lo, hi)
}

// describe names the TOML type of a decoded value for messages.
func describe(v any) string {
	switch x := v.(type) {
	case string:
		return fmt.Sprintf("the string %q", x)
	case int64:
		return fmt.Sprintf("the integer %d", x)
	case float64:
		return fmt.Sprintf("the float %v", x)
	case bool:
		return fmt.Sprintf("the boolean %v", x)
	case map[string]any:
		return "a table"
	case []map[string]any, []any:
		return "an array"
	default:
		return "a date-time"
	}
}
