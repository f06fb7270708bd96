package redistest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// TestReserve: a port another live test process holds is refused, one
// whose process is gone is taken over, and one this process holds is not
// handed out again.
func TestReserve(t *testing.T) {
	dir := portsDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	// Ports no test binds: reservations only.
	const live, gone, mine = 1, 2, 3
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	for port, pid := range map[int]int{live: os.Getppid(), gone: dead.Process.Pid} {
		if err := os.WriteFile(filepath.Join(dir, strconv.Itoa(port)), []byte(strconv.Itoa(pid)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, port := range []int{live, gone, mine} {
			_ = os.Remove(filepath.Join(dir, strconv.Itoa(port)))
		}
	})
	if reserve(live) {
		t.Error("a port a live process holds was reserved again")
	}
	if !reserve(gone) {
		t.Error("a port whose process is gone was not taken over")
	}
	if !reserve(mine) || reserve(mine) {
		t.Error("a free port: want reserved once, then refused")
	}
}
