package redistest

import "syscall"

// sysProcAttr makes the kernel kill redis-server when the test process dies,
// so that no server outlives a crashed or interrupted test binary.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
