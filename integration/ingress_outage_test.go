package integration

// Durable ingress through an outage (issue 31, "An outage"): events from
// three providers' schemes are accepted by webhook_enqueue while the
// service behind the gateway is down, then delivered to it once it is
// up: each exactly once, its body and kept headers byte-identical. And
// again with the gateway killed (SIGKILL) mid-run and restarted on the
// same store: nothing that was answered 2xx is lost.

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hookgate/hookgate/verify"
)

// ingressSecret is the destination's own secret: the service behind the
// gateway trusts this one signature, whatever the provider.
var ingressSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("hookgate-ingress-internal-hop-secret"))

// The providers' secrets, one route each.
const (
	ingressGitHubSecret = "gh-ingress-secret"
	ingressStripeSecret = "whsec_stripe_ingress_test"
)

// ingressSite is three receiver routes, one per provider's scheme, each
// verifying its provider's signature and enqueueing for destination svc:
// GitHub keeps three named headers, Stripe every header (*), and the
// Standard Webhooks route one header and the request's path and query.
func ingressSite() string {
	return fmt.Sprintf(`
	route /github/* {
		webhook_verify github {
			secret %s
		}
		webhook_enqueue svc {
			keep_headers X-GitHub-Event X-GitHub-Delivery X-GitHub-Hook-ID
		}
	}
	route /stripe/* {
		webhook_verify stripe {
			secret %s
		}
		webhook_enqueue svc {
			keep_headers *
		}
	}
	route /standard/* {
		webhook_verify standard {
			secret %s
		}
		webhook_enqueue svc {
			keep_headers X-Tenant
			keep_path
		}
	}`, ingressGitHubSecret, ingressStripeSecret, devSecret)
}

// ingressGlobal is the hookgate app: destination svc on port of the
// loopback, with destWorkers workers. The breaker opens after a few
// refused connections and tries again every 300ms, so that nothing is
// attempted while the service is down, and its start is noticed at
// once; attempts are plenty, so that no event dies of the outage.
func ingressGlobal(store string, port, destWorkers int) string {
	return fmt.Sprintf(`hookgate {
		%s
		sender {
			workers 16
			attempts 1000
			backoff 50ms 500ms
			timeout 1s
			lease 4s
			breaker {
				failures 5
				open 300ms
				half_open 1
			}
		}
		destination svc {
			url http://127.0.0.1:%d/svc
			scheme standard
			secret %s
			workers %d
		}
	}`, store, port, ingressSecret, destWorkers)
}

// ingressEvent is one event a provider sends, and what the service must
// receive of it.
type ingressEvent struct {
	Scheme      string
	Seq         string // unique, in the body: how the service tells events apart
	URI         string // the request's path and query at the gateway
	WantURI     string // the path and query the service must see
	Body        []byte
	ContentType string
	Header      http.Header // sent, beside the signature
	Kept        []string    // the names of Header the route keeps
	NotKept     []string    // names the service must not see
	WantID      string      // the Webhook-Id the service must see; "" for the body's key
	ID          string      // the provider's delivery ID
}

// ingressEvents are n events, the three providers in turn. run makes the
// IDs unique to the test run.
func ingressEvents(n int, run string) []ingressEvent {
	events := make([]ingressEvent, n)
	for i := range events {
		seq := fmt.Sprintf("%s-%d", run, i)
		// Odd whitespace, a non-ASCII rune and a varying length: a body
		// is relayed byte for byte, never re-encoded.
		pad := strings.Repeat("x", 50+i%300)
		switch i % 3 {
		case 0:
			id := fmt.Sprintf("%s-gh-%d", run, i)
			events[i] = ingressEvent{
				Scheme:      "github",
				Seq:         seq,
				URI:         "/github/hook",
				WantURI:     "/svc",
				Body:        fmt.Appendf(nil, "{\"seq\": %q,\n\t\"ref\":\"refs/heads/main\", \"note\":\"caf\u00e9\", \"pad\":%q}\n", seq, pad),
				ContentType: "application/json",
				Header: http.Header{
					"X-Github-Event":                         {"push"},
					"X-Github-Delivery":                      {id},
					"X-Github-Hook-Id":                       {"4242"},
					"X-Github-Hook-Installation-Target-Type": {"repository"},
					"User-Agent":                             {"GitHub-Hookshot/ingress"},
				},
				Kept:    []string{"X-Github-Event", "X-Github-Delivery", "X-Github-Hook-Id"},
				NotKept: []string{"X-Github-Hook-Installation-Target-Type", "X-Hub-Signature-256"},
				ID:      id,
			}
		case 1:
			id := fmt.Sprintf("evt_%s_%d", run, i)
			events[i] = ingressEvent{
				Scheme:      "stripe",
				Seq:         seq,
				URI:         "/stripe/webhook",
				WantURI:     "/svc",
				Body:        fmt.Appendf(nil, `{"id":%q,"object":"event","type":"invoice.paid","seq":%q,"pad":%q}`, id, seq, pad),
				ContentType: "application/json; charset=utf-8",
				Header: http.Header{
					"X-Trace":       {seq + "-a", seq + "-b"}, // repeated: both, in order
					"Cache-Control": {"no-cache"},
					"Accept":        {"*/*; q=0.5, application/json"},
					"Cookie":        {"session=never-kept-by-star"},
					"Authorization": {"Bearer never-kept-by-star"},
				},
				Kept:    []string{"X-Trace", "Cache-Control", "Accept"},
				NotKept: []string{"Stripe-Signature", "Cookie", "Authorization"},
				WantID:  id,
				ID:      id,
			}
		default:
			id := fmt.Sprintf("msg_%s_%d", run, i)
			events[i] = ingressEvent{
				Scheme:      "standard",
				Seq:         seq,
				URI:         fmt.Sprintf("/standard/acme/orders?shard=%d&next=%%2Fa%%2Fb", i%7),
				WantURI:     fmt.Sprintf("/svc/standard/acme/orders?shard=%d&next=%%2Fa%%2Fb", i%7),
				Body:        fmt.Appendf(nil, `{"type":"order.created","seq":%q,"pad":%q}`, seq, pad),
				ContentType: "application/json",
				Header: http.Header{
					"X-Tenant":   {"acme"},
					"X-Not-Kept": {"1"},
				},
				Kept:    []string{"X-Tenant"},
				NotKept: []string{"X-Not-Kept"},
				WantID:  id,
				ID:      id,
			}
		}
	}
	return events
}

// ingressAnswer is webhook_enqueue's answer.
type ingressAnswer struct {
	State     string `json:"state"`
	Duplicate bool   `json:"duplicate"`
}

// ingressProvider sends events to a gateway as their providers would,
// each signed at the time given.
type ingressProvider struct {
	t       *testing.T
	client  *http.Client
	signers map[string]*verify.Verifier
}

func newIngressProvider(t *testing.T) *ingressProvider {
	return &ingressProvider{
		t: t,
		client: &http.Client{
			Timeout:   30 * time.Second,
			Transport: &http.Transport{MaxIdleConnsPerHost: 32},
		},
		signers: map[string]*verify.Verifier{
			"github":   signer(t, "github", ingressGitHubSecret),
			"stripe":   signer(t, "stripe", ingressStripeSecret),
			"standard": signer(t, "standard", devSecret),
		},
	}
}

// send sends ev to the gateway at base, signed at ts. An error is a
// request that got no answer (the gateway was killed under it, say).
func (p *ingressProvider) send(base string, ev *ingressEvent, ts time.Time) (int, ingressAnswer, error) {
	req, err := http.NewRequest(http.MethodPost, base+ev.URI, bytes.NewReader(ev.Body))
	if err != nil {
		return 0, ingressAnswer{}, err
	}
	for k, v := range ev.Header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", ev.ContentType)
	for k, v := range p.signers[ev.Scheme].Sign(ev.ID, ts, ev.Body) {
		req.Header[k] = v
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, ingressAnswer{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, ingressAnswer{}, err
	}
	var a ingressAnswer
	if resp.StatusCode/100 == 2 {
		if err := json.Unmarshal(body, &a); err != nil {
			return resp.StatusCode, a, fmt.Errorf("the answer %q: %w", body, err)
		}
	} else {
		err = fmt.Errorf("answered %d: %s", resp.StatusCode, body)
	}
	return resp.StatusCode, a, err
}

// sendResult is how a send was answered.
type sendResult struct {
	Status int
	Answer ingressAnswer
	Err    error
}

func (r sendResult) accepted() bool { return r.Err == nil && r.Status/100 == 2 }

// sendAll sends the events of idx with a few concurrent clients, each
// signed at ts, and returns each one's result by index. accepted, when
// not nil, is called after each 2xx answer with the number so far.
func (p *ingressProvider) sendAll(base string, events []ingressEvent, idx []int, ts time.Time, accepted func(n int64)) map[int]sendResult {
	const clients = 8
	var (
		mu      sync.Mutex
		results = make(map[int]sendResult, len(idx))
		n       atomic.Int64
		wg      sync.WaitGroup
	)
	next := make(chan int)
	for range clients {
		wg.Go(func() {
			for i := range next {
				st, a, err := p.send(base, &events[i], ts)
				r := sendResult{st, a, err}
				mu.Lock()
				results[i] = r
				mu.Unlock()
				if r.accepted() && accepted != nil {
					accepted(n.Add(1))
				}
			}
		})
	}
	for _, i := range idx {
		next <- i
	}
	close(next)
	wg.Wait()
	return results
}

// ingressReceipt is one request the service received.
type ingressReceipt struct {
	N      int // its order of arrival, from 0
	URI    string
	Header http.Header
	Body   []byte
	SigErr error // the destination's signature, checked
}

// ingressService stands in for the service behind the gateway, on a port
// reserved at once and listened on only when start is called: down
// until then (nothing listens; a connection is refused).
type ingressService struct {
	t        *testing.T
	port     int
	delay    atomic.Int64 // each answer waits this long (a time.Duration)
	verifier *verify.Verifier
	srv      *httptest.Server

	mu    sync.Mutex
	total int
	bySeq map[string][]ingressReceipt
}

func newIngressService(t *testing.T, delay time.Duration) *ingressService {
	s := &ingressService{
		t:        t,
		port:     freePort(t),
		verifier: signer(t, "standard", ingressSecret),
		bySeq:    map[string][]ingressReceipt{},
	}
	s.delay.Store(int64(delay))
	return s
}

// start listens on the reserved port and serves.
func (s *ingressService) start() {
	s.t.Helper()
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", s.port))
	if err != nil {
		s.t.Fatalf("listening on the service's port: %v", err)
	}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	_ = s.srv.Listener.Close() // the one it made, on a port of its own
	s.srv.Listener = l
	s.srv.Start()
	s.t.Cleanup(s.srv.Close)
}

func (s *ingressService) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	var ev struct{ Seq string }
	_ = json.Unmarshal(body, &ev) // an unreadable body is filed under "", and reported
	_, sigErr := s.verifier.Verify(verify.Request{Method: r.Method, Header: r.Header, Body: body}, time.Now())
	s.mu.Lock()
	s.bySeq[ev.Seq] = append(s.bySeq[ev.Seq], ingressReceipt{N: s.total, URI: r.RequestURI, Header: r.Header.Clone(), Body: body, SigErr: sigErr})
	s.total++
	s.mu.Unlock()
	time.Sleep(time.Duration(s.delay.Load())) // a slow service, when asked for
	w.WriteHeader(http.StatusOK)
}

// counts returns how many distinct events and how many requests the
// service has received.
func (s *ingressService) counts() (distinct, total int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.bySeq), s.total
}

// receipts returns the requests received for seq.
func (s *ingressService) receipts(seq string) []ingressReceipt {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.bySeq[seq])
}

// waitDrained waits until the gateway holds no envelope of svc queued
// or leased: each has then been settled, delivered or dead, and every
// request it made is counted by the service. It reports whether the
// service has received n distinct events by then; a generous deadline
// bounds the wait (a polling bound, not a measurement).
func waitDrained(t *testing.T, g *gateway, svc *ingressService, n int) bool {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		_, d := destinationStatus(t, g, "svc")
		distinct, _ := svc.counts()
		if d.Queued == 0 && d.Leased == 0 {
			if distinct < n {
				t.Errorf("the gateway holds nothing more to deliver, and the service has %d distinct events of %d; svc's depth is %+v", distinct, n, d)
			}
			return distinct >= n
		}
		if time.Now().After(deadline) {
			t.Errorf("after 3 minutes the service has %d distinct events of %d, and svc's depth is %+v", distinct, n, d)
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkReceipt checks one request the service received for ev: the
// body, its Content-Type, the path and query, the kept headers byte for
// byte (repeated ones in order), none of those not kept, the Hookgate-
// headers (Hookgate-Received-At, to the second, not before since nor
// after now) and the destination's own signature.
func checkReceipt(t *testing.T, ev *ingressEvent, r ingressReceipt, since time.Time) {
	t.Helper()
	if !bytes.Equal(r.Body, ev.Body) {
		t.Errorf("%s %s: the body is not byte-identical:\n got %q\nwant %q", ev.Scheme, ev.Seq, r.Body, ev.Body)
	}
	if got := r.Header.Values("Content-Type"); !slices.Equal(got, []string{ev.ContentType}) {
		t.Errorf("%s %s: Content-Type %q, want %q", ev.Scheme, ev.Seq, got, ev.ContentType)
	}
	if r.URI != ev.WantURI {
		t.Errorf("%s %s: the service was called at %q, want %q", ev.Scheme, ev.Seq, r.URI, ev.WantURI)
	}
	for _, name := range ev.Kept {
		if diff := cmp.Diff(ev.Header[name], r.Header[name]); diff != "" {
			t.Errorf("%s %s: kept header %s (-sent +received):\n%s", ev.Scheme, ev.Seq, name, diff)
		}
	}
	for _, name := range ev.NotKept {
		if v, ok := r.Header[name]; ok {
			t.Errorf("%s %s: %s = %q reached the service; it is not kept", ev.Scheme, ev.Seq, name, v)
		}
	}
	if got := r.Header.Get("Hookgate-Source"); got != ev.Scheme {
		t.Errorf("%s %s: Hookgate-Source = %q, want %q", ev.Scheme, ev.Seq, got, ev.Scheme)
	}
	at, err := time.Parse(time.RFC3339, r.Header.Get("Hookgate-Received-At"))
	switch {
	case err != nil:
		t.Errorf("%s %s: Hookgate-Received-At = %q is not RFC 3339: %v", ev.Scheme, ev.Seq, r.Header.Get("Hookgate-Received-At"), err)
	case at.Before(since.Truncate(time.Second)) || at.After(time.Now()):
		t.Errorf("%s %s: Hookgate-Received-At = %s, not between the first send (%s) and now", ev.Scheme, ev.Seq, at, since.Format(time.RFC3339))
	}
	switch id := r.Header.Get("Webhook-Id"); {
	case ev.WantID != "" && id != ev.WantID:
		t.Errorf("%s %s: Webhook-Id = %q, want the provider's %q", ev.Scheme, ev.Seq, id, ev.WantID)
	case ev.WantID == "" && !strings.HasPrefix(id, ev.Scheme+":"):
		// GitHub signs no delivery ID: the envelope's is the body's key
		// within the scope of the route's secret, as webhook_dedupe's.
		t.Errorf("%s %s: Webhook-Id = %q, want the body's key, %s:...", ev.Scheme, ev.Seq, id, ev.Scheme)
	}
	if r.SigErr != nil {
		t.Errorf("%s %s: the destination's signature does not verify: %v", ev.Scheme, ev.Seq, r.SigErr)
	}
}

// ingressN is the number of events of the outage: the 5,000, or
// fewer under -short.
func ingressN(full int) int {
	if testing.Short() {
		return full / 10
	}
	return full
}

// TestIngressOutage: the service behind the gateway is down while 5,000
// events from three providers' schemes (GitHub, Stripe, Standard
// Webhooks) are sent; each is answered 2xx at once, and a provider's
// retry of a few of them (the same delivery ID, a new signature
// timestamp) is answered 2xx as a duplicate. Then the service starts:
// it receives each event exactly once, its body, Content-Type, path and
// kept headers byte-identical, Hookgate-Source its scheme,
// Hookgate-Received-At RFC 3339, signed with the destination's secret.
//
// The outage is 60 s of the service down; here it is down until
// every send is answered, however long that takes: bound by the count,
// not the clock.
func TestIngressOutage(t *testing.T) {
	backends(t, func(t *testing.T, global string) {
		n := ingressN(5000)
		svc := newIngressService(t, 0)
		g := startGateway(t, ingressSite(), gatewayOptions{Global: ingressGlobal(storeOf(global), svc.port, 8)})
		events := ingressEvents(n, randomID("out"))
		p := newIngressProvider(t)

		begun := time.Now()
		results := p.sendAll(g.URL, events, upTo(n), time.Now().Add(-2*time.Minute), nil)
		sent := time.Since(begun)
		for i, r := range results {
			if !r.accepted() || r.Status != http.StatusAccepted || r.Answer.Duplicate || r.Answer.State != "queued" {
				t.Errorf("%s %s: %d %+v %v; want 202, new, queued", events[i].Scheme, events[i].Seq, r.Status, r.Answer, r.Err)
			}
		}
		if len(results) != n {
			t.Fatalf("%d sends answered, want %d", len(results), n)
		}
		t.Logf("%d events sent with the service down in %s (%.0f/s)", n, sent.Round(time.Millisecond), float64(n)/sent.Seconds())
		if t.Failed() {
			return
		}

		// A provider retries a few: the same delivery ID (or, for GitHub,
		// which signs none, the same body), a fresh signature timestamp.
		var retries []int
		for i := 0; i < n && len(retries) < 9; i += n / 9 {
			retries = append(retries, i, i+1, i+2)
		}
		for i, r := range p.sendAll(g.URL, events, retries, time.Now(), nil) {
			if !r.accepted() || !r.Answer.Duplicate || r.Answer.State != "queued" {
				t.Errorf("the retry of %s %s: %d %+v %v; want 2xx, a duplicate, queued", events[i].Scheme, events[i].Seq, r.Status, r.Answer, r.Err)
			}
		}
		if _, d := destinationStatus(t, g, "svc"); d.Queued+d.Leased != n || d.Dead != 0 {
			t.Errorf("with the service down, svc's depth is %+v; want %d queued or leased, none dead", d, n)
		}

		svc.start()
		up := time.Now()
		drained := waitDrained(t, g, svc, n)
		distinct, total := svc.counts()
		t.Logf("the service received %d distinct events in %d requests, %s after it started", distinct, total, time.Since(up).Round(time.Millisecond))
		if !drained {
			return
		}
		for i := range events {
			ev := &events[i]
			rs := svc.receipts(ev.Seq)
			if len(rs) != 1 {
				t.Errorf("%s %s (%s) arrived %d times, want exactly once", ev.Scheme, ev.Seq, ev.ID, len(rs))
			}
			for _, r := range rs {
				checkReceipt(t, ev, r, begun)
			}
		}
		if total != n {
			t.Errorf("the service received %d requests for %d events", total, n)
		}
		if _, d := destinationStatus(t, g, "svc"); d.Dead != 0 || d.Corrupt != 0 {
			t.Errorf("svc's depth at the end is %+v; want none dead or corrupt", d)
		}
	})
}

// upTo is 0, 1, ..., n-1.
func upTo(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// TestIngressSurvivesSIGKILL: events are sent while the gateway is
// killed (SIGKILL) after half of them are answered 2xx; it restarts on
// the same store (the same data directory, or the same Redis and key
// prefix), and the providers send again each event not answered 2xx, as
// a provider retries what failed. No event answered 2xx is lost, and
// every event is delivered. With the service down at the kill no attempt
// is in flight, and none is delivered twice; with the service up and
// slow (100ms an answer) at the kill, an attempt in flight then (its
// answer not yet settled in the store) is made again after the restart:
// those duplicates are counted, each is delivered twice at most, and
// its first delivery came from the killed gateway.
//
// How many: at most the leases the killed gateway held for the
// destination, which the sender bounds by twice its workers (the
// prefetch buffer and the attempts; sender/worker.go). Strictly, an
// answered attempt keeps its lease until its outcome is settled, and
// the settle loop does not hold the workers back: the bound holds while
// a settle takes less than an answer (100ms here). With answers of 20ms
// on the embedded store, 5 duplicates were seen with 4 workers; with
// 100ms, exactly the 4 attempts in flight, run after run. The service
// is fast again after the kill, so that the rest is delivered quickly.
func TestIngressSurvivesSIGKILL(t *testing.T) {
	const destWorkers = 4
	for _, tc := range []struct {
		name  string
		up    bool          // the service is up during the kill
		delay time.Duration // its answer's delay
	}{
		{"service down", false, 0},
		{"service up and slow", true, 100 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			backends(t, func(t *testing.T, global string) {
				n := ingressN(2000)
				svc := newIngressService(t, tc.delay)
				if tc.up {
					svc.start()
				}
				opts := gatewayOptions{Global: ingressGlobal(storeOf(global), svc.port, destWorkers)}
				g := startGateway(t, ingressSite(), opts)
				events := ingressEvents(n, randomID("kill"))
				p := newIngressProvider(t)

				var (
					kill     sync.Once
					answered int64
				)
				begun := time.Now()
				results := p.sendAll(g.URL, events, upTo(n), time.Now().Add(-2*time.Minute), func(accepted int64) {
					if accepted == int64(n/2) {
						kill.Do(func() {
							g.Kill()
							answered = accepted
							svc.delay.Store(0)
						})
					}
				})
				// Nothing calls the service between the kill and the
				// restart: what it received by then came from the killed
				// gateway.
				_, atKill := svc.counts()
				var acceptedBefore, unanswered []int
				for i := range n {
					if r, ok := results[i]; ok && r.accepted() {
						acceptedBefore = append(acceptedBefore, i)
					} else {
						unanswered = append(unanswered, i)
					}
				}
				t.Logf("killed after %d answers: %d of %d events answered 2xx before the kill, %d not; the service had received %d requests",
					answered, len(acceptedBefore), n, len(unanswered), atKill)
				if answered == 0 {
					t.Fatalf("the gateway was never killed: %d of %d answered", len(acceptedBefore), n)
				}

				// The same data directory, port and store: the same gateway,
				// restarted.
				opts.DataDir = g.DataDir
				opts.Port = portOf(t, g.URL)
				g = startGateway(t, ingressSite(), opts)
				p.client.CloseIdleConnections() // they were to the killed process
				dups := 0
				for i, r := range p.sendAll(g.URL, events, unanswered, time.Now(), nil) {
					if !r.accepted() {
						t.Errorf("%s %s sent again after the restart: %d %v; want 2xx", events[i].Scheme, events[i].Seq, r.Status, r.Err)
					}
					if r.Answer.Duplicate {
						dups++
					}
				}
				t.Logf("%d events sent again after the restart; %d of them had been stored before the kill, unanswered", len(unanswered), dups)
				if !tc.up {
					svc.start()
				}

				drained := waitDrained(t, g, svc, n)
				distinct, total := svc.counts()
				t.Logf("the service received %d distinct events in %d requests", distinct, total)
				lost := 0
				for _, i := range acceptedBefore {
					if len(svc.receipts(events[i].Seq)) == 0 {
						lost++
						t.Errorf("%s %s was answered 2xx before the kill and never delivered: lost", events[i].Scheme, events[i].Seq)
					}
				}
				if !drained || lost > 0 {
					return
				}
				var twice []string
				for i := range events {
					ev := &events[i]
					rs := svc.receipts(ev.Seq)
					if len(rs) == 0 {
						t.Errorf("%s %s was never delivered", ev.Scheme, ev.Seq)
					}
					if len(rs) > 1 {
						twice = append(twice, ev.Seq)
						if len(rs) > 2 {
							t.Errorf("%s %s was delivered %d times: one kill makes one attempt again at most", ev.Scheme, ev.Seq, len(rs))
						}
						// The service can tell a duplicate by its ID: the
						// same delivery ID on every attempt.
						for _, r := range rs[1:] {
							if r.Header.Get("Webhook-Id") != rs[0].Header.Get("Webhook-Id") {
								t.Errorf("%s %s was delivered as %q, then as %q: one event, one delivery ID", ev.Scheme, ev.Seq,
									rs[0].Header.Get("Webhook-Id"), r.Header.Get("Webhook-Id"))
							}
						}
						if rs[0].N >= atKill {
							t.Errorf("%s %s was delivered %d times, first as request %d, after the restart (%d before it): only an attempt in flight at the kill may be made again",
								ev.Scheme, ev.Seq, len(rs), rs[0].N, atKill)
						}
					}
					for _, r := range rs {
						checkReceipt(t, ev, r, begun)
					}
				}
				t.Logf("%d events delivered more than once (attempts in flight at the kill): %v", len(twice), twice)
				switch {
				case !tc.up && len(twice) > 0:
					t.Errorf("with the service down at the kill, %d events were delivered twice; want none", len(twice))
				case len(twice) > 2*destWorkers:
					t.Errorf("%d events delivered twice; want at most %d: the attempts in flight at the kill, and the answers not yet settled", len(twice), 2*destWorkers)
				}
				if _, d := destinationStatus(t, g, "svc"); d.Dead != 0 || d.Corrupt != 0 {
					t.Errorf("svc's depth at the end is %+v; want none dead or corrupt", d)
				}
			})
		})
	}
}

// portOf is the port of a gateway's URL.
func portOf(t *testing.T, url string) int {
	t.Helper()
	var port int
	if _, err := fmt.Sscanf(url, "http://127.0.0.1:%d", &port); err != nil {
		t.Fatalf("the port of %s: %v", url, err)
	}
	return port
}
