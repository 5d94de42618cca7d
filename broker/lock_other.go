//go:build !unix

package broker

import "os"

// LockFile is the file in an embedded server's data directory that the
// serving process holds locked.
const LockFile = "switchyard.lock"

// lockDir does not lock on this platform: one process per data directory
// is then the operator's care.
func lockDir(string) (*os.File, error) { return nil, nil }

func unlock(*os.File) {}
