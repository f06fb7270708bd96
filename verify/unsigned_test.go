//go:build linux

package verify

import (
	"errors"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/hookgate/hookgate/internal/cputime"
)

// BenchmarkUnsigned1MiB compares, in the same run, the rejection of an
// unsigned (forged) 1 MiB request under twilio with one under standard:
// each iteration verifies one of each, timed by the thread's CPU clock,
// so that a busy machine slows neither alone. x_standard is the ratio of
// twilio's CPU time to standard's; B/op and allocs/op of each are reported
// apart. The finding was a 1 MiB form costing 11.5 MB, 50k allocations and
// 26-43x standard's CPU before any MAC. Twilio's floor is 2x: it must MAC
// the content twice, for the URL with and without its port.
func BenchmarkUnsigned1MiB(b *testing.B) {
	const size = 1 << 20
	std := mustNewB(b, "standard", []string{testSecret("standard", 0)})
	stdBody := []byte(`{"data":"` + strings.Repeat("x", size-11) + `"}`)
	stdHeader := std.Sign("msg_1", t0, []byte("another body"))
	stdReq := Request{Header: stdHeader, Body: stdBody}
	tw := mustNewB(b, "twilio", []string{twilioToken})

	// A callback's parameters and one long message body, escaped as
	// browsers and Twilio escape text.
	call := twilioCall("+14158675309")
	call.Set("Body", strings.Repeat("Hello, world! ", size/16))
	params := func(n int) string {
		form := url.Values{}
		for i := range n {
			form.Set("P"+strconv.Itoa(i), strings.Repeat("v", size/n-8))
		}
		return form.Encode()
	}
	for _, c := range []struct {
		name string
		body string
	}{
		{"form_long_value", call.Encode()},
		{"form_1000_params", params(maxTwilioParams)},
		// Under url.ParseQuery's own bound, over twilio's: refused unparsed.
		{"form_10000_params", params(10000)},
	} {
		b.Run(c.name, func(b *testing.B) {
			twReq := twilioRequest(twilioURL, "RSOYDt4T1cUTdK1PDd93/VVr8B8=", formType, []byte(c.body))
			verifyStd := func() {
				if _, err := std.Verify(stdReq, t0); !errors.Is(err, ErrBadSignature) {
					b.Fatalf("standard: %v, want ErrBadSignature", err)
				}
			}
			verifyTwilio := func() {
				if _, err := tw.Verify(twReq, t0); !errors.Is(err, ErrBadSignature) && !errors.Is(err, ErrMalformedHeader) {
					b.Fatalf("twilio: %v, want a rejection", err)
				}
			}
			stdBytes, stdAllocs := memPerRun(verifyStd)
			twBytes, twAllocs := memPerRun(verifyTwilio)
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var stdTime, twTime int64
			b.SetBytes(int64(len(c.body)))
			for b.Loop() {
				start := cputime.Thread(b)
				verifyStd()
				mid := cputime.Thread(b)
				verifyTwilio()
				stdTime += int64(mid - start)
				twTime += int64(cputime.Thread(b) - mid)
			}
			b.ReportMetric(float64(twTime)/float64(stdTime), "x_standard")
			b.ReportMetric(twBytes, "twilio_B/op")
			b.ReportMetric(twAllocs, "twilio_allocs/op")
			b.ReportMetric(stdBytes, "standard_B/op")
			b.ReportMetric(stdAllocs, "standard_allocs/op")
		})
	}
}

// memPerRun is what f allocates per call, in bytes and allocations, after
// a first call that fills the pools.
func memPerRun(f func()) (bytes, allocs float64) {
	f()
	const runs = 20
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		f()
	}
	runtime.ReadMemStats(&after)
	return float64(after.TotalAlloc-before.TotalAlloc) / runs, float64(after.Mallocs-before.Mallocs) / runs
}
