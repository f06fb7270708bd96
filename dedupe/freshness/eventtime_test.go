package freshness

import (
	"testing"
	"time"
)

func TestParseEventTime(t *testing.T) {
	tests := []struct {
		in   string
		want time.Time
		ok   bool
	}{
		{"2026-11-30T10:05:00Z", time.Date(2026, 11, 30, 10, 5, 0, 0, time.UTC), true},
		{"2026-11-30T11:05:00.25+01:00", time.Date(2026, 11, 30, 10, 5, 0, 250e6, time.UTC), true},
		{"1796040300", time.Unix(1796040300, 0), true},
		{"1796040300.5", time.Unix(1796040300, 5e8), true},
		{"253402300799", time.Unix(253402300799, 0), true},
		{"253402300800", time.Time{}, false},
		{"yesterday", time.Time{}, false},
		{"-5", time.Time{}, false},
		{"1e9", time.Time{}, false},
		{"0x10", time.Time{}, false},
		{"1_000", time.Time{}, false},
		{"NaN", time.Time{}, false},
		{"2026-11-30 10:05:00", time.Time{}, false},
	}
	for _, tt := range tests {
		got, err := ParseEventTime(tt.in)
		if (err == nil) != tt.ok || (tt.ok && !got.Equal(tt.want)) {
			t.Errorf("ParseEventTime(%q) = %v, %v; want %v ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
	long := "x" + string(make([]byte, 100))
	if _, err := ParseEventTime(long); err == nil || len(err.Error()) > 260 {
		t.Errorf("Parse of 101 bytes: %v; want an error quoting at most 40 of them", err)
	}
}

// FuzzParse: any input parses to a time that round-trips through RFC
// 3339, or fails with an error that echoes at most 40 bytes of it.
func FuzzParseEventTime(f *testing.F) {
	for _, s := range []string{"2026-11-30T10:05:00Z", "1796040300", "1796040300.5", "yesterday", "1e9", "+5", " 5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseEventTime(s)
		if err != nil {
			if len(err.Error()) > 260 { // 40 input bytes, quoted (at most 4 bytes each), and the message
				t.Fatalf("error too long: %q", err)
			}
			return
		}
		if again, err := ParseEventTime(got.UTC().Format(time.RFC3339Nano)); err != nil || !again.Equal(got) {
			t.Fatalf("%q parsed to %v, which does not round-trip: %v, %v", s, got, again, err)
		}
	})
}
