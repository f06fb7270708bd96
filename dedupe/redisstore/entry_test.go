package redisstore

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hookgate/hookgate/dedupe"
)

func TestParseEntry(t *testing.T) {
	fp := dedupe.FingerprintOf([]byte(`{"a":1}`))
	claim := string(appendClaim(nil, &fp, "tok1", 1_800_000_030_000, 1_800_003_600_000))
	// What the record script makes of claim: 'r', bytes 1 to the token's
	// end kept, then expiry ':' record.
	record := "r" + claim[1:tokenAt+1+len("tok1")] + "1800003601000:" + "\x01\x00rec:ord"
	tests := []struct {
		name string
		in   string
		want entry
		ok   bool
	}{
		{"claim", claim, entry{fp: fp, token: "tok1", leaseUntil: 1_800_000_030_000, expires: 1_800_003_600_000}, true},
		{"took over", "c1" + claim[2:], entry{tookOver: true, fp: fp, token: "tok1", leaseUntil: 1_800_000_030_000, expires: 1_800_003_600_000}, true},
		{"record", record, entry{recorded: true, fp: fp, token: "tok1", expires: 1_800_003_601_000, rec: "\x01\x00rec:ord"}, true},
		{"negative times", string(appendClaim(nil, &fp, "", -5, -1)), entry{fp: fp, leaseUntil: -5, expires: -1}, true},
		{"empty", "", entry{}, false},
		{"short", claim[:tokenAt], entry{}, false},
		{"unknown state", "x" + claim[1:], entry{}, false},
		{"token past the end", claim[:tokenAt] + "\xff" + "tok1", entry{}, false},
		{"no colon", strings.ReplaceAll(claim, ":", ""), entry{}, false},
		{"bad lease", claim[:tokenAt+5] + "x:1", entry{}, false},
		{"bad expiry", claim + "x", entry{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := parseEntry(tt.in)
			if ok != tt.ok {
				t.Fatalf("parseEntry ok = %v, want %v", ok, tt.ok)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(entry{})); diff != "" {
				t.Errorf("parseEntry (-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzParseEntry: parseEntry never panics, and a claim it reads is
// written back as the same entry.
func FuzzParseEntry(f *testing.F) {
	fp := dedupe.FingerprintOf([]byte("x"))
	claim := appendClaim(nil, &fp, "0123456789abcdef0123456789abcdef", 1_800_000_030_000, 1_800_003_600_000)
	f.Add(string(claim))
	f.Add("r" + string(claim[1:tokenAt+33]) + "1800003601000:\x01\x00\xc8\x01\x00body")
	f.Fuzz(func(t *testing.T, v string) {
		e, ok := parseEntry(v)
		if !ok || e.recorded {
			return
		}
		b := appendClaim(nil, &e.fp, e.token, e.leaseUntil, e.expires)
		if e.tookOver {
			b[1] = '1'
		}
		again, ok := parseEntry(string(b))
		if !ok || again != e {
			t.Fatalf("%q reads as %+v, written back as %q, which reads as %+v (%v)", v, e, b, again, ok)
		}
	})
}
