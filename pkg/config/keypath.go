package config

import "strconv"

// Keys are named in one canonical dotted form everywhere (error messages,
// the position index): parts joined by ".", quoted like TOML when they are
// not bare keys, and array elements as "[i]", e.g. pool.web.backend[1].weight
// or pool."a.b".retries. Using one form for both lets a problem found while
// walking the decoded map be looked up in the index built from the source.

// joinKey appends the table key name to parent.
func joinKey(parent, name string) string {
	part := quoteKeyPart(name)
	if parent == "" {
		return part
	}
	return parent + "." + part
}

// indexKey names element i of the array at parent.
func indexKey(parent string, i int) string {
	return parent + "[" + strconv.Itoa(i) + "]"
}

// quoteKeyPart returns name as TOML would accept it: bare when it can be.
func quoteKeyPart(name string) string {
	if name == "" {
		return `""`
	}
	for i := 0; i < len(name); i++ {
		if !isBareKeyByte(name[i]) {
			return strconv.Quote(name)
		}
	}
	return name
}

func isBareKeyByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// keyAncestors returns the canonical keys enclosing key, innermost first:
// pool.web.backend[1].weight -> pool.web.backend[1], pool.web.backend,
// pool.web, pool.
func keyAncestors(key string) []string {
	var cuts []int
	inQuote := false
	for i := 0; i < len(key); i++ {
		switch c := key[i]; {
		case inQuote && c == '\\':
			i++ // the escaped byte cannot end the quote
		case c == '"':
			inQuote = !inQuote
		case !inQuote && (c == '.' || c == '[') && i > 0:
			cuts = append(cuts, i)
		}
	}
	out := make([]string, 0, len(cuts))
	for j := len(cuts) - 1; j >= 0; j-- {
		out = append(out, key[:cuts[j]])
	}
	return out
}
