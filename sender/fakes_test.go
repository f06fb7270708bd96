package sender

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hookgate/hookgate/verify"
	"github.com/sony/gobreaker/v2"
)

// The workers' tests run in synctest bubbles over a memQueue and a
// fakeReceiver: no network, and the time they judge is the bubble's.

// fakeReceiver is an http.RoundTripper that answers without a network: its
// answer says, per request, how long it takes and what it answers.
type fakeReceiver struct {
	mu     sync.Mutex
	answer func(r *http.Request, id string, n int) (time.Duration, int, http.Header)
	byID   map[string]int
	done   map[string][]time.Time // when each ID's attempts were answered
	// onStart, when set, sees each request as it starts.
	onStart func(id string)
}

func newFakeReceiver(answer func(r *http.Request, id string, n int) (time.Duration, int, http.Header)) *fakeReceiver {
	return &fakeReceiver{answer: answer, byID: map[string]int{}, done: map[string][]time.Time{}}
}

func (f *fakeReceiver) RoundTrip(r *http.Request) (*http.Response, error) {
	id := r.Header.Get("Webhook-Id")
	f.mu.Lock()
	f.byID[id]++
	n := f.byID[id]
	answer, onStart := f.answer, f.onStart
	f.mu.Unlock()
	if onStart != nil {
		onStart(id)
	}
	took, status, h := answer(r, id, n)
	t := time.NewTimer(took)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
		return nil, r.Context().Err()
	}
	f.mu.Lock()
	f.done[id] = append(f.done[id], time.Now())
	f.mu.Unlock()
	if h == nil {
		h = http.Header{}
	}
	return &http.Response{StatusCode: status, Header: h, Body: http.NoBody, Request: r}, nil
}

func (f *fakeReceiver) setAnswer(answer func(r *http.Request, id string, n int) (time.Duration, int, http.Header)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answer = answer
}

// count is how many attempts id got.
func (f *fakeReceiver) count(id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.byID[id]
}

// total is how many attempts were made.
func (f *fakeReceiver) total() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.byID {
		n += c
	}
	return n
}

// answered is when id's attempts were answered.
func (f *fakeReceiver) answered(id string) []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.done[id]...)
}

// answers answers every request after took with status.
func answers(took time.Duration, status int) func(*http.Request, string, int) (time.Duration, int, http.Header) {
	return func(*http.Request, string, int) (time.Duration, int, http.Header) { return took, status, nil }
}

// idSigner "signs" with the delivery ID alone, as the signers put it in a
// header.
type idSigner struct{}

func (idSigner) SignRequest(_ verify.Request, id string, _ time.Time) (http.Header, error) {
	return http.Header{"Webhook-Id": {id}}, nil
}

// testConfig is a config whose retries come at once, and whose breaker
// does not open unless a test says so.
func testConfig() Config {
	return Config{
		Workers: 8, Attempts: 3, Backoff: Backoff{Base: time.Millisecond, Cap: 2 * time.Millisecond},
		Timeout: 2 * time.Second, Lease: 10 * time.Second, Poll: 20 * time.Millisecond,
		Breaker: BreakerConfig{Failures: 1000},
	}
}

// logs is a slog handler's output, safe for concurrent writes.
type logs struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// run starts s until the test ends (inside a bubble: before it does).
func run(t *testing.T, s *Sender) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

// newTestSender is a sender over q whose requests rt answers, its logs in
// the returned buffer.
func newTestSender(t *testing.T, q Queue, cfg Config, dests []Destination, rt http.RoundTripper, opts Options) (*Sender, *logs) {
	t.Helper()
	out := new(logs)
	opts.Transport = rt
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(out, nil))
	}
	for i := range dests {
		if dests[i].Signer == nil {
			dests[i].Signer = idSigner{}
		}
	}
	s, err := New(q, cfg, dests, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s, out
}

func enqueueN(t *testing.T, s *Sender, dest, prefix string, n int) []string {
	t.Helper()
	var ids []string
	for i := range n {
		id := prefix + "-" + strconv.Itoa(i)
		if _, err := s.Enqueue(context.Background(), &Envelope{ID: id, Destination: dest, Payload: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// breakerCounts reads the counts of dest's breaker: this instance's own.
func breakerCounts(t *testing.T, s *Sender, dest string) gobreaker.Counts {
	t.Helper()
	d, ok := s.dest(dest)
	if !ok {
		t.Fatalf("no destination %s", dest)
	}
	return s.breaker(d).cur.Load().Counts()
}

// breakerReport is this instance's report on dest's breaker: its latest
// success and failure run.
func breakerReport(s *Sender, dest string) Report {
	s.shared.mu.Lock()
	defer s.shared.mu.Unlock()
	if e := s.shared.entries[dest]; e != nil {
		return e.report
	}
	return Report{}
}
