//go:build unix

package broker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// LockFile is the file in an embedded server's data directory that the
// serving process holds locked (and that names its pid).
const LockFile = "switchyard.lock"

// lockDir takes an exclusive lock on dir for this process: one embedded
// server per data directory, since two servers writing one JetStream store
// corrupt it. The lock is released by unlock, or by the kernel when the
// process ends, however it ends.
func lockDir(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("broker: data directory: %w", err)
	}
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("broker: data directory lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		data, _ := os.ReadFile(path)
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			who := "another process"
			if pid := strings.TrimSpace(string(data)); pid != "" {
				who = "process " + pid
			}
			return nil, fmt.Errorf("broker: data directory %s is in use by %s (one embedded server per directory: stop it, or reach its sessions with --nats)", dir, who)
		}
		return nil, fmt.Errorf("broker: data directory lock: %w", err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// unlock releases a lock taken by lockDir.
func unlock(f *os.File) {
	if f != nil {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close()
	}
}
