//go:build !unix

package embedkafka

import "errors"

// LockFile is the lock file's name on platforms with flock(2); elsewhere no
// lock is taken (MsgMesh's supported platforms are Unix).
const LockFile = "msgmesh.lock"

// ErrDataDirLocked is returned when another process holds the data
// directory (Unix only).
var ErrDataDirLocked = errors.New("data directory is in use by another process")

type dirLock struct{}

// lockDir takes no lock where flock(2) does not exist.
func lockDir(string) (*dirLock, error) { return &dirLock{}, nil }

func (*dirLock) release() {}
