package adminclient

import (
	"testing"
)

func TestNew(t *testing.T) {
	for _, tc := range []struct {
		addr, base, name string
	}{
		{"localhost:2019", "http://localhost:2019", "http://localhost:2019"},
		{"http://127.0.0.1:2019/", "http://127.0.0.1:2019", "http://127.0.0.1:2019"},
		{"unix//run/hookgate/admin.sock|0600", "http://127.0.0.1", "unix//run/hookgate/admin.sock"},
		{"unix//run/hookgate/admin.sock", "http://127.0.0.1", "unix//run/hookgate/admin.sock"},
		{"unix/admin.sock", "http://127.0.0.1", "unix/admin.sock"},
	} {
		e, err := New(tc.addr, 0)
		if err != nil {
			t.Errorf("New(%q): %v", tc.addr, err)
			continue
		}
		if e.Base.String() != tc.base || e.Name != tc.name {
			t.Errorf("New(%q): base %s, name %s; want %s, %s", tc.addr, e.Base, e.Name, tc.base, tc.name)
		}
	}
	for _, addr := range []string{"unix/", "unix/|0600", "http://", "ftp://host:21"} {
		if _, err := New(addr, 0); err == nil || err.Error() != "--address: want host:port, an http:// URL, or unix//path/to/admin.sock" {
			t.Errorf("New(%q) = %v, want the address error", addr, err)
		}
	}
}
