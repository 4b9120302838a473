package accesslog

import (
	"fmt"
	"log/slog"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// reopenCheck is how often, while writing, the file's path is checked
// for a rotation.
const reopenCheck = time.Second

// file is an access log opened by path for appending, reopened when the
// path no longer names it: a log rotator that renames the file (and maybe
// creates an empty one, as logrotate's "create" does) gets the next lines
// in a file at the path within a second, with no signal to send. One that
// copies and truncates ("copytruncate") needs nothing: appends go on at
// the new end.
type file struct {
	path    string
	f       *os.File
	dev     uint64
	ino     uint64
	checked time.Time
	failing bool // the last reopen failed (logged once per episode)
	log     *slog.Logger
}

// openAppend opens path for appending, creating it (0640: the lines name
// clients) when missing.
func openAppend(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
}

func openFile(path string, log *slog.Logger) (*file, error) {
	f, err := openAppend(path)
	if err != nil {
		return nil, fmt.Errorf("open the access log: %w", err)
	}
	fl := &file{path: path, log: log, checked: time.Now()}
	fl.use(f)
	return fl, nil
}

func (fl *file) use(f *os.File) {
	fl.f = f
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) == nil {
		fl.dev, fl.ino = st.Dev, st.Ino
	}
}

func (fl *file) Write(p []byte) (int, error) {
	if fl.f == nil {
		return 0, ErrClosed
	}
	if now := time.Now(); now.Sub(fl.checked) >= reopenCheck {
		fl.checked = now
		fl.reopenIfMoved()
	}
	return fl.f.Write(p)
}

// reopenIfMoved reopens the path when it names another file, or none.
// Should that fail, lines keep going to the file already open.
func (fl *file) reopenIfMoved() {
	var st unix.Stat_t
	if err := unix.Stat(fl.path, &st); err == nil && st.Dev == fl.dev && st.Ino == fl.ino {
		return
	}
	f, err := openAppend(fl.path)
	if err != nil {
		if !fl.failing {
			fl.log.Error("access log: cannot reopen its file after it was moved; writing to the moved file", "path", fl.path, "error", err)
			fl.failing = true
		}
		return
	}
	if fl.failing {
		fl.log.Info("access log: file reopened", "path", fl.path)
		fl.failing = false
	}
	old := fl.f
	fl.use(f)
	old.Close()
}

func (fl *file) Close() error {
	if fl.f == nil {
		return nil
	}
	err := fl.f.Close()
	fl.f = nil
	return err
}
