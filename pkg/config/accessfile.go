package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// checkAccessFile reports an access log file run could not append to,
// without creating or changing anything (check must leave the host as it
// found it): an existing file must open for appending, a missing one needs
// a directory this user may create files in. With the access log off the
// key is unused.
func checkAccessFile(c *collector, l Log) {
	if l.Access == AccessOff || l.AccessFile == "" {
		return
	}
	const key = "log.access_file"
	st, err := os.Stat(l.AccessFile)
	switch {
	case err == nil && st.IsDir():
		c.add(key, "%q is a directory: name the file to append the access log to", l.AccessFile)
	case err == nil:
		f, err := os.OpenFile(l.AccessFile, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			c.add(key, "cannot append to the access log: %v", err)
			return
		}
		f.Close()
	case errors.Is(err, fs.ErrNotExist):
		dir := filepath.Dir(l.AccessFile)
		if err := unix.Access(dir, unix.W_OK|unix.X_OK); err != nil {
			c.add(key, "cannot create the access log %q: directory %s: %v", l.AccessFile, dir, err)
		}
	default:
		c.add(key, "cannot use the access log: %v", err)
	}
}
