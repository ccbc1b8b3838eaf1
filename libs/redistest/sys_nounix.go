//go:build !unix

package redistest

import "os"

func tryLockFile(*os.File) (bool, error) { return true, nil }

func unlockFile(*os.File) {}
