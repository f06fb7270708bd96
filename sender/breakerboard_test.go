package sender

import (
	"testing"
	"time"
)

// TestBoardText: the shared state and the reports read back from their
// text as they were (to the millisecond), the generation leads the
// shared state's text, and what is not that text is refused.
func TestBoardText(t *testing.T) {
	t0 := time.UnixMilli(1_800_000_000_123)
	for _, sh := range []Shared{{}, {Gen: 7, Open: true, Expiry: t0.Add(time.Minute), Since: t0}, {Gen: 1<<64 - 1, Since: t0}} {
		text, err := sh.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var got Shared
		if err := got.UnmarshalText(text); err != nil || got.Gen != sh.Gen || got.Open != sh.Open || !got.Expiry.Equal(sh.Expiry) || !got.Since.Equal(sh.Since) {
			t.Errorf("%q reads back as %+v, %v; want %+v", text, got, err, sh)
		}
	}
	if text, _ := (Shared{Gen: 12, Open: true, Expiry: t0}).MarshalText(); string(text) != "12 open 1800000000123 0" {
		t.Errorf("shared state text %q, want 12 open 1800000000123 0", text)
	}
	for _, r := range []Report{{}, {OK: t0, At: t0.Add(time.Second)}, {OK: t0, Failing: t0.Add(time.Millisecond), At: t0}} {
		text, _ := r.MarshalText()
		var got Report
		if err := got.UnmarshalText(text); err != nil || !got.OK.Equal(r.OK) || !got.Failing.Equal(r.Failing) || !got.At.Equal(r.At) {
			t.Errorf("%q reads back as %+v, %v; want %+v", text, got, err, r)
		}
	}
	for _, bad := range []string{"", "1 open 0", "1 half 0 0", "x open 0 0", "1 open 0 y", "-1 closed 0 0", "1 open 0 0 0"} {
		var sh Shared
		if sh.UnmarshalText([]byte(bad)) == nil {
			t.Errorf("shared state %q read, want refused", bad)
		}
	}
	for _, bad := range []string{"", "0 0", "0 0 x", "0 0 0 0"} {
		var r Report
		if r.UnmarshalText([]byte(bad)) == nil {
			t.Errorf("report %q read, want refused", bad)
		}
	}
}
