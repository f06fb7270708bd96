// Command loadgen drives signed webhooks at a gateway on loopback and
// reports requests/s and latency percentiles; `loadgen upstream` is the
// stand-in receiver every gateway under test forwards to. It stops by
// itself after -d, or after -n requests.
//
// -scheme github sends what GitHub sends: a push event (a JSON body of
// -size bytes, or -size to -size+spread-1, that names its delivery, so
// that no two bodies are alike), X-Hub-Signature-256, a unique
// X-GitHub-Delivery, X-GitHub-Event: push and GitHub's other headers.
//
//	loadgen upstream -addr 127.0.0.1:9101
//	loadgen -url http://127.0.0.1:8080/ -mode unique -c 32 -d 10s
//	loadgen -url http://127.0.0.1:8080/ -scheme github -secret s3cret -c 32 -n 20000
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookgate/hookgate/verify"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "upstream" {
		upstream(os.Args[2:])
		return
	}
	url := flag.String("url", "http://127.0.0.1:8080/", "gateway URL")
	mode := flag.String("mode", "unique", "unique: a new delivery ID per request; dup: one ID, every request a duplicate")
	conc := flag.Int("c", 32, "concurrent clients")
	dur := flag.Duration("d", 10*time.Second, "duration")
	secret := flag.String("secret", "whsec_aG9va2dhdGUtZGV2LXNlY3JldC1uZXZlci11c2UtaW4tcHJvZA==", "the scheme's secret")
	label := flag.String("label", "", "label for the result line")
	scheme := flag.String("scheme", "standard", "standard, or github: GitHub's headers and a body unique to each delivery")
	size := flag.Int("size", 1024, "the github scheme's body size in bytes (standard's is 965)")
	spread := flag.Int("spread", 1, "the github scheme's n-th body is size + n%spread bytes: sizes spread over an allocator's size classes")
	limit := flag.Int64("n", 0, "stop after this many requests (0: only -d stops it)")
	flag.Parse()

	if *scheme != "standard" && *scheme != "github" {
		log.Fatalf("-scheme %q: standard or github", *scheme) //nolint:gosec // G706: %q quotes it, so it cannot forge a log line
	}
	signer, err := verify.New(*scheme, []string{*secret}, verify.Options{})
	if err != nil {
		log.Fatal(err)
	}
	body := bytes.Repeat([]byte("x"), 900)
	body = append([]byte(`{"type":"reservation.confirmed","reservation_id":"r-1","pad":"`), body...)
	body = append(body, `"}`...)
	start := time.Now()
	// sign makes the run's n-th delivery (0: the dup mode's one): its body
	// and its headers.
	sign := func(n int64) ([]byte, http.Header) {
		if *scheme == "github" {
			id := githubDeliveryID(start.UnixNano(), n)
			b := githubPush(id, *size+int(n%int64(max(1, *spread))))
			return b, githubHeaders(signer.Sign(id, time.Now(), b))
		}
		id := fmt.Sprintf("msg_%d_%d", start.UnixNano(), n)
		if n == 0 {
			id = fmt.Sprintf("msg_dup_%d", start.UnixNano())
		}
		return body, signer.Sign(id, time.Now(), body)
	}
	// New each run: the priming request records it.
	dupBody, dupHeaders := sign(0)

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *conc * 2}}
	if *mode == "dup" {
		// Record the delivery once, so every measured request is a replay.
		req, _ := http.NewRequest(http.MethodPost, *url, bytes.NewReader(dupBody))
		req.Header = dupHeaders.Clone()
		resp, err := client.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		// Drained and closed for the connection's reuse; a failure
		// there shows in the measured requests.
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
	var seq atomic.Int64
	var non2xx, errs atomic.Int64
	latencies := make([][]time.Duration, *conc)
	deadline := time.Now().Add(*dur)
	start = time.Now()
	var wg sync.WaitGroup
	for w := range *conc {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				b, h := dupBody, dupHeaders
				if *mode == "unique" {
					n := seq.Add(1)
					if *limit > 0 && n > *limit {
						break
					}
					b, h = sign(n)
				}
				req, _ := http.NewRequest(http.MethodPost, *url, bytes.NewReader(b))
				req.Header = h.Clone()
				req.Header.Set("Content-Type", "application/json")
				t0 := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					errs.Add(1)
					continue
				}
				// Drained for the connection's reuse; only the status counts.
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				latencies[w] = append(latencies[w], time.Since(t0))
				if resp.StatusCode/100 != 2 && non2xx.Add(1) == 1 {
					log.Printf("first answer not 2xx: %s", resp.Status)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	all := slices.Concat(latencies...)
	slices.Sort(all)
	if len(all) == 0 {
		log.Fatal("no request completed")
	}
	pct := func(p float64) time.Duration { return all[min(len(all)-1, int(float64(len(all))*p))] }
	fmt.Printf("%s requests=%d rps=%.0f p50_ms=%.3f p99_ms=%.3f non2xx=%d errors=%d\n",
		*label, len(all), float64(len(all))/elapsed.Seconds(),
		float64(pct(0.50).Microseconds())/1000, float64(pct(0.99).Microseconds())/1000, non2xx.Load(), errs.Load())
}

// githubDeliveryID is a unique delivery ID shaped as GitHub's (a UUID),
// from the run's start and a sequence number.
func githubDeliveryID(run, n int64) string {
	return fmt.Sprintf("%08x-%04x-%04x-%04x-%012x", uint32(run>>32), uint16(run>>16), uint16(run), uint16(n>>48), n&0xffffffffffff)
}

// githubPush is a push event's JSON body of size bytes (at least what its
// fields take) that names the delivery: a provider's bodies differ from
// one event to the next, and the schemes that key a delivery by its body
// (github among them) would see duplicates otherwise.
func githubPush(id string, size int) []byte {
	head := `{"ref":"refs/heads/main","before":"` + id + `","after":"` + id +
		`","repository":{"id":123456789,"full_name":"hookgate/bench"},"pusher":{"name":"bench"},"pad":"`
	pad := max(0, size-len(head)-2)
	b := make([]byte, 0, len(head)+pad+2)
	b = append(b, head...)
	b = append(b, bytes.Repeat([]byte("x"), pad)...)
	return append(b, `"}`...)
}

// githubHeaders adds to a github signature's headers (X-Hub-Signature-256,
// X-GitHub-Delivery) the others GitHub sends with a push.
func githubHeaders(h http.Header) http.Header {
	h.Set("X-GitHub-Event", "push")
	h.Set("X-GitHub-Hook-ID", "512345678")
	h.Set("X-GitHub-Hook-Installation-Target-Type", "repository")
	h.Set("X-GitHub-Hook-Installation-Target-ID", "123456789")
	h.Set("User-Agent", "GitHub-Hookshot/5f3c2a1")
	return h
}

// upstream serves a small JSON answer to every request: the receiver.
func upstream(args []string) {
	fs := flag.NewFlagSet("upstream", flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:9101", "listen address")
	_ = fs.Parse(args) // ExitOnError: Parse exits rather than return an error
	// A loopback benchmark server: timeouts would only add to what it measures.
	log.Fatal(http.ListenAndServe(*addr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { //nolint:gosec // G114: see above
		_, _ = io.Copy(io.Discard, r.Body) // the body is read only to be discarded
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"enrolled":true}`)) // a client gone away has nothing to be told
	})))
}
