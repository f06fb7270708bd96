// Command loadgen drives signed webhooks at a gateway on loopback and
// reports requests/s and latency percentiles; `loadgen upstream` is the
// stand-in receiver every gateway under test forwards to. It stops by
// itself after -d.
//
//	loadgen upstream -addr 127.0.0.1:9101
//	loadgen -url http://127.0.0.1:8080/ -mode unique -c 32 -d 10s
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
	secret := flag.String("secret", "whsec_aG9va2dhdGUtZGV2LXNlY3JldC1uZXZlci11c2UtaW4tcHJvZA==", "standard scheme secret")
	label := flag.String("label", "", "label for the result line")
	flag.Parse()

	signer, err := verify.New("standard", []string{*secret}, verify.Options{})
	if err != nil {
		log.Fatal(err)
	}
	body := bytes.Repeat([]byte("x"), 900)
	body = append([]byte(`{"type":"reservation.confirmed","reservation_id":"r-1","pad":"`), body...)
	body = append(body, `"}`...)
	dupHeaders := signer.Sign(fmt.Sprintf("msg_dup_%d", time.Now().UnixNano()), time.Now(), body) // new each run: the priming request records it

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *conc * 2}}
	if *mode == "dup" {
		// Record the delivery once, so every measured request is a replay.
		req, _ := http.NewRequest(http.MethodPost, *url, bytes.NewReader(body))
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
	start := time.Now()
	var wg sync.WaitGroup
	for w := range *conc {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				h := dupHeaders
				if *mode == "unique" {
					h = signer.Sign(fmt.Sprintf("msg_%d_%d", start.UnixNano(), seq.Add(1)), time.Now(), body)
				}
				req, _ := http.NewRequest(http.MethodPost, *url, bytes.NewReader(body))
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
				if resp.StatusCode/100 != 2 {
					non2xx.Add(1)
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
