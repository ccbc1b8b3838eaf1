package harness

import "syscall"

// Children die with the harness, so that a crashed test leaves no process
// behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
