// Package health answers readiness: whether the store works (it answers
// within a second, and takes writes) and whether the sender's workers run. Every answer is probed
// for: nothing is cached, so an outage shows in the first answer after
// it. Requests that arrive while a probe is in flight share it, so a
// flood of probes costs the store one round trip at a time.
package health

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/hookgate/hookgate/internal/problem"
)

// A part's state, and the answer's status.
const (
	OK          = "ok"          // the part works
	Unavailable = "unavailable" // the part fails: the answer is 503
	Off         = "off"         // the config does not use the part
)

// DefaultTimeout is how long the store has to answer.
const DefaultTimeout = time.Second

// ErrOff is what a Probe returns for a part the config does not use.
var ErrOff = errors.New("not used by this config")

// Probe checks one part: nil when it works, ErrOff when the config does
// not use it, else why it fails. It should return when ctx ends.
type Probe func(ctx context.Context) error

// Report is the answer's body, JSON like
//
//	{"status":"ok","store":"ok","sender":"off"}
//
// Status is ok when no part is unavailable, else unavailable; each part
// is ok, unavailable or off.
type Report struct {
	Status string `json:"status"`
	Store  string `json:"store"`
	Sender string `json:"sender"`
}

// Ready reports whether the answer is 200.
func (r Report) Ready() bool { return r.Status == OK }

// Checker probes the parts. Its zero value, but for the probes, is
// ready to use; it must not be copied after first use.
type Checker struct {
	// Store checks the store. Nil: off.
	Store Probe
	// Sender says whether the sender's workers run. Nil: off.
	Sender Probe
	// Timeout bounds a probe: a part that has not answered by then is
	// unavailable. Default DefaultTimeout.
	Timeout time.Duration
	// Logger is told when a part starts failing (a warning, with the
	// error) and when it works again. Default: none.
	Logger *slog.Logger

	probes  singleflight.Group
	failing [2]atomic.Bool // by part: store, sender
}

// Check probes every part, within the timeout, or until ctx ends.
// Concurrent calls share the probe in flight, which is never older than
// the timeout.
func (c *Checker) Check(ctx context.Context) Report {
	ch := c.probes.DoChan("", func() (any, error) { return c.probe(), nil })
	select {
	case res := <-ch:
		return res.Val.(Report)
	case <-ctx.Done():
		return Report{Status: Unavailable, Store: Unavailable, Sender: Unavailable}
	}
}

// probe runs the probes concurrently; it returns within the timeout,
// even when a probe ignores its context (that probe's goroutine ends
// when the probe does).
func (c *Checker) probe() Report {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout())
	defer cancel()
	store, sender := make(chan error, 1), make(chan error, 1)
	go func() { store <- run(ctx, c.Store) }()
	go func() { sender <- run(ctx, c.Sender) }()
	r := Report{Status: OK, Store: c.state(ctx, 0, "store", store), Sender: c.state(ctx, 1, "sender", sender)}
	if r.Store == Unavailable || r.Sender == Unavailable {
		r.Status = Unavailable
	}
	return r
}

// run runs p; a nil probe is off.
func run(ctx context.Context, p Probe) error {
	if p == nil {
		return ErrOff
	}
	return p(ctx)
}

// state waits for one probe's answer, at most until ctx ends, and logs a
// change from working to failing or back.
func (c *Checker) state(ctx context.Context, i int, part string, answer <-chan error) string {
	var err error
	select {
	case err = <-answer: // an answer in time wins over the deadline passed since
	default:
		select {
		case err = <-answer:
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	if errors.Is(err, ErrOff) {
		return Off
	}
	if errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("no answer within %s", c.timeout())
	}
	was := c.failing[i].Swap(err != nil)
	if c.Logger != nil {
		switch {
		case err != nil && !was:
			c.Logger.Warn("readiness: "+part+" unavailable: answering 503 until it works again", "part", part, "error", err)
		case err == nil && was:
			c.Logger.Info("readiness: "+part+" works again", "part", part)
		}
	}
	if err != nil {
		return Unavailable
	}
	return OK
}

func (c *Checker) timeout() time.Duration {
	if c.Timeout <= 0 {
		return DefaultTimeout
	}
	return c.Timeout
}

// ServeHTTP answers GET and HEAD with the report as JSON: 200 when ready,
// else 503, never to be cached; other methods get 405 method_not_allowed.
func (c *Checker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		problem.Write(w, problem.MethodNotAllowed, "readiness takes GET or HEAD, not "+problem.Truncate(r.Method, 40), 0)
		return
	}
	rep := c.Check(r.Context())
	body, _ := json.Marshal(rep) // strings only: cannot fail
	body = append(body, '\n')
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	status := http.StatusOK
	if !rep.Ready() {
		status = http.StatusServiceUnavailable
	}
	w.WriteHeader(status)
	_, _ = w.Write(body) // a prober gone away has nothing to be told
}
