package portcheck

import (
	"net"
	"net/netip"
	"runtime"
	"slices"
	"testing"
)

// TestOwnListsThisProcessListeners: a listener this process opens is
// among Own's addresses (once its cached answer is stale), one of
// another process's is not.
func TestOwnListsThisProcessListeners(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Own reads /proc: Linux only")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	own.Lock()
	own.at = own.at.Add(-ownTTL) // stale: read again
	own.Unlock()
	addr := netip.MustParseAddrPort(ln.Addr().String())
	if got := Own(); !slices.Contains(got, addr) {
		t.Fatalf("Own() = %v, want it to hold %v", got, addr)
	}
}
