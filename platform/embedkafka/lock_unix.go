//go:build unix

package embedkafka

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// LockFile is the file inside the data directory that the running
// embedded broker holds an exclusive flock(2) on, with its pid inside.
const LockFile = "msgmesh.lock"

// ErrDataDirLocked is returned (wrapped, naming the holder's pid) when
// another process holds the data directory.
var ErrDataDirLocked = errors.New("data directory is in use by another process")

// dirLock is an exclusive lock on a data directory, held until release.
type dirLock struct{ f *os.File }

// lockDir takes an exclusive, non-blocking flock on <dir>/msgmesh.lock and
// writes this process's pid into it. The kernel drops the lock when the
// process exits, however it exits (kill -9 included), so a stale file never
// blocks a restart.
func lockDir(dir string) (*dirLock, error) {
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("embedkafka: lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer func() { _ = f.Close() }()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			holder := "unknown pid"
			if b, rerr := os.ReadFile(path); rerr == nil {
				if pid, perr := strconv.Atoi(string(bytes.TrimSpace(b))); perr == nil {
					holder = "pid " + strconv.Itoa(pid)
				}
			}
			return nil, fmt.Errorf("embedkafka: %w: %s is locked by another msgmesh (%s); stop that process or give this one another data_dir (MSGMESH_DATA_DIR)",
				ErrDataDirLocked, dir, holder)
		}
		return nil, fmt.Errorf("embedkafka: lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
		_ = f.Sync()
	}
	return &dirLock{f: f}, nil
}

// release drops the lock (the file stays; its content is the last holder).
func (l *dirLock) release() {
	if l == nil || l.f == nil {
		return
	}
	_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	_ = l.f.Close()
	l.f = nil
}
