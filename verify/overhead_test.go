//go:build linux

package verify

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"runtime"
	"testing"
	"time"

	"github.com/hookgate/hookgate/internal/cputime"
)

// BenchmarkHMACOverhead compares one verification with one secret, for
// each HMAC-SHA256 scheme, with the bare cost of what it cannot avoid: one
// HMAC-SHA256 over the same 1 KiB from a state keyed once, and a
// constant-time comparison. x_bare is the ratio of their CPU times;
// x_hmac_new is the ratio to the same HMAC keyed afresh each time with
// hmac.New, as a verifier written in a few lines does. The three run
// interleaved, in chunks, timed by the thread's CPU clock, so that a busy
// machine slows none of them. The budget is 1.2x.
func BenchmarkHMACOverhead(b *testing.B) {
	body := bytes.Repeat([]byte(`{"k":"v"}`), 1024/9)
	body = append([]byte(`{"id":"evt_1","event_id":"Ev1",`), body...)[:1024]
	key := []byte(testSecret("github", 0))
	want := hmacSHA256(key, body)
	keyed := hmac.New(sha256.New, key)
	sum := make([]byte, 0, sha256.Size)
	bare := func() {
		keyed.Reset()
		keyed.Write(body)
		if !hmac.Equal(keyed.Sum(sum[:0]), want) {
			b.Fatal("no match")
		}
	}
	fresh := func() {
		m := hmac.New(sha256.New, key)
		m.Write(body)
		if !hmac.Equal(m.Sum(nil), want) {
			b.Fatal("no match")
		}
	}
	const chunk = 256
	for _, scheme := range []string{"standard", "stripe", "github", "shopify", "slack", "hookgate", "zoom", "meta", "twitter"} {
		b.Run(scheme, func(b *testing.B) {
			v := mustNewB(b, scheme, []string{testSecret(scheme, 0)})
			r := Request{Header: v.Sign("msg_1", t0, body), Body: body}
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var bareTime, freshTime, schemeTime time.Duration
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				start := cputime.Thread(b)
				for range chunk {
					bare()
				}
				mid := cputime.Thread(b)
				for range chunk {
					if _, err := v.Verify(r, t0); err != nil {
						b.Fatal(err)
					}
				}
				end := cputime.Thread(b)
				for range chunk {
					fresh()
				}
				bareTime += mid - start
				schemeTime += end - mid
				freshTime += cputime.Thread(b) - end
			}
			b.ReportMetric(float64(schemeTime)/float64(bareTime), "x_bare")
			b.ReportMetric(float64(schemeTime)/float64(freshTime), "x_hmac_new")
		})
	}
}
