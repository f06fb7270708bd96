package cli

import (
	"os"
	"os/exec"
	"testing"
)

// TestGatewayPIDElsewhere: a gateway whose admin API is on another host
// is not waited for (its process ID means nothing here), and why is said;
// the admin address is not even asked.
func TestGatewayPIDElsewhere(t *testing.T) {
	for _, addr := range []string{"192.0.2.1:2019", "gateway.example:2019"} {
		pid, why := gatewayPID(addr)
		if pid != 0 || why == "" {
			t.Errorf("gatewayPID(%q) = %d, %q; want 0 and why", addr, pid, why)
		}
	}
}

// TestExited: a running process has not exited; one that ran and was
// reaped has.
func TestExited(t *testing.T) {
	if exited(os.Getpid()) {
		t.Error("exited(self) = true")
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if !exited(cmd.Process.Pid) {
		t.Errorf("exited(%d), a reaped child, = false", cmd.Process.Pid)
	}
}
