package redistest

import (
	"testing"
	"time"
)

// TestFreePortNeverRepeats: the kernel hands closed ephemeral ports out
// again (5000 draws from ~28000 collide hundreds of times); FreePort must
// not, or two gateways would share a port through SO_REUSEPORT.
func TestFreePortNeverRepeats(t *testing.T) {
	seen := map[int]bool{}
	for range 5000 {
		p := FreePort(t)
		if seen[p] {
			t.Fatalf("port %d returned twice", p)
		}
		seen[p] = true
	}
}

// TestCPU reads the user and system CPU of INFO's cpu section, and fails
// on a value that is not a number.
func TestCPU(t *testing.T) {
	info := "# CPU\r\nused_cpu_sys:1.500000\r\nused_cpu_user:0.250000\r\nused_cpu_sys_children:9.000000\r\n"
	got, err := CPU(info)
	if err != nil || got != 1750*time.Millisecond {
		t.Errorf("CPU = %v, %v; want 1.75s", got, err)
	}
	if _, err := CPU("used_cpu_user:x\r\n"); err == nil {
		t.Error("CPU of a value that is not a number: no error")
	}
}
