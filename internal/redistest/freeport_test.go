package redistest

import "testing"

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
