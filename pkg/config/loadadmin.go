package config

import (
	"fmt"
	"os"

	"github.com/BurntSushi/toml"
)

// LoadAdmin reads the [admin] table of the file at path, with its defaults
// and checks, and nothing else of it: a client of the admin API (l4lb ctl)
// needs only where the endpoint is and its token file, and must work
// beside a running l4lb while the rest of the file is being edited, so a
// problem elsewhere in the file is not its concern. The file must still
// be TOML.
func LoadAdmin(path string) (Admin, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Admin{}, fmt.Errorf("read config: %w", err)
	}
	var raw map[string]any
	if _, err := toml.Decode(string(data), &raw); err != nil {
		return Admin{}, syntaxError(path, err)
	}
	c := &collector{file: path, pos: locate(data)}
	a := DefaultAdmin()
	if t := newTable(c, "", "", raw).sub("admin"); t != nil {
		decodeAdmin(t, &a)
	}
	if len(c.errs) > 0 {
		c.errs.sort()
		return Admin{}, c.errs
	}
	return a, nil
}
