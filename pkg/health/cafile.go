package health

import (
	"crypto/x509"
	"fmt"
	"os"
	"sync"
	"syscall"
)

// CAFile is a PEM bundle of CA certificates that TLS checks verify
// backends' certificates against, read from its file at the first check
// and again whenever the file changes (another inode, size or
// modification time; a stat per check), so a rotated CA is used from the
// next check on without a reload. One CAFile serves every backend of a
// pool: the bundle is parsed once, not once per backend.
//
// The file is checked when the configuration is (config.CheckHost); one
// that cannot be read or holds no certificate at run time is local
// trouble, not the backend's: the checks that need it are Inconclusive
// until it is mended. A CAFile is safe for concurrent use.
type CAFile struct {
	path   string
	report func(error) // nil: none

	// mu orders the checks' reads, so that what is reported follows the
	// file's own order of changes.
	mu      sync.Mutex
	stamp   fileStamp // of the file pool was read from
	pool    *x509.CertPool
	trouble string // the error last reported; "": none
}

// fileStamp tells one version of a file from another.
type fileStamp struct {
	ino, size, mtime int64 // mtime in nanoseconds since the epoch
}

// NewCAFile returns the bundle at path; nothing is read until Pool. A
// report, if not nil, is called when the file turns unusable (with the
// error, and again when the error changes) and when it is usable again
// (nil): once per change, not once per check, so that a pool of many
// backends says it in one log line. It is called with the CAFile's lock
// held, and must not call it back.
func NewCAFile(path string, report func(err error)) *CAFile {
	return &CAFile{path: path, report: report}
}

// Path is the file's path.
func (f *CAFile) Path() string { return f.path }

// Pool returns the bundle's certificates, read again when the file has
// changed since the last read. The error names the file.
func (f *CAFile) Pool() (*x509.CertPool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	pool, err := f.read()
	if f.report != nil {
		f.noteTrouble(err)
	}
	return pool, err
}

// noteTrouble reports err if it is news: the first error, another one, or
// none after one (f.mu held).
func (f *CAFile) noteTrouble(err error) {
	now := ""
	if err != nil {
		now = err.Error()
	}
	if now != f.trouble {
		f.trouble = now
		f.report(err)
	}
}

// read is Pool's work (f.mu held): a stat per call, a read and a parse
// when the file changed.
func (f *CAFile) read() (*x509.CertPool, error) {
	st, err := os.Stat(f.path)
	if err != nil {
		return nil, fmt.Errorf("ca_file: %w", err)
	}
	stamp := fileStamp{size: st.Size(), mtime: st.ModTime().UnixNano()}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		stamp.ino = int64(sys.Ino)
	}
	if f.pool != nil && f.stamp == stamp {
		return f.pool, nil
	}
	data, err := os.ReadFile(f.path)
	if err != nil {
		return nil, fmt.Errorf("ca_file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("ca_file %s: no PEM certificate in it", f.path)
	}
	// A failed read keeps nothing, so the next check reads the file again.
	f.pool, f.stamp = pool, stamp
	return pool, nil
}
