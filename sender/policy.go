package sender

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Class is the failure class of an attempt.
type Class int

// The failure classes. Their numbers are stored with each envelope: a new
// class is added at the end. Classify says which are retried and which
// count toward the breaker.
const (
	ClassNone Class = iota
	ClassNetwork
	ClassTimeout
	ClassHTTP5xx
	ClassHTTP4xx
	ClassHTTP3xx
	ClassGone
	// ClassRequest is a request that cannot be built or sent for a reason
	// of its own, not the network's (a header value that is not valid
	// HTTP, say): permanent, and never counted by the breaker.
	ClassRequest
)

var classNames = [...]string{"", "network", "timeout", "http_5xx", "http_4xx", "http_3xx", "gone", "request"}

// Classes lists the error classes' names.
func Classes() []string { return append([]string(nil), classNames[1:]...) }

func (c Class) String() string {
	if int(c) < len(classNames) {
		return classNames[c]
	}
	return "unknown"
}

// ParseClass parses a class name.
func ParseClass(s string) (Class, error) {
	for i, n := range classNames {
		if i > 0 && n == s {
			return Class(i), nil
		}
	}
	return 0, fmt.Errorf("unknown error class %q (want %s)", s, strings.Join(Classes(), ", "))
}

// BreakerCount is how an attempt counts toward its destination's breaker.
type BreakerCount int

// How attempts count toward the breaker.
const (
	// BreakerSuccess: the receiver answered (a 2xx, or a permanent
	// failure such as a 400).
	BreakerSuccess BreakerCount = iota
	// BreakerFailure: a transient failure of the destination (network,
	// timeout, 408, 425, 429, 5xx).
	BreakerFailure
	// BreakerNotCounted: neither (hookgate's own 409 answers, which say
	// another copy is being handled, and a request that could not be
	// built or sent).
	BreakerNotCounted
)

// Result is what one attempt's response (or error) means.
type Result struct {
	Delivered bool
	Class     Class // when not delivered
	// Transient failures are retried; others go to the dead-letter queue.
	Transient bool
	// Breaker is how the attempt counts toward the destination's breaker.
	Breaker BreakerCount
	// RetryAfter is the receiver's Retry-After, if it gave one.
	RetryAfter time.Duration
	// Pause is set for 410 Gone: the destination is paused.
	Pause bool
}

// Classify judges one attempt, the one place that says what each answer
// means: a 2xx is delivered; a network error, a timeout, 408, 425, 429 and
// a 5xx are transient and count toward the breaker; hookgate's own 409
// answers that carry Retry-After (in_flight, entity_busy) are transient
// but not counted; a request that could not be built or sent (class
// request) is permanent and not counted; other 4xx and 3xx are permanent,
// and 410 also pauses the destination. Redirects are never followed: a
// 3xx is the receiver's answer.
func Classify(status int, header http.Header, err error, now time.Time) Result {
	if err != nil {
		var ne net.Error
		var re *requestError
		switch {
		case errors.As(err, &re):
			return Result{Class: ClassRequest, Breaker: BreakerNotCounted}
		case errors.Is(err, errTimeout) || (errors.As(err, &ne) && ne.Timeout()):
			return Result{Class: ClassTimeout, Transient: true, Breaker: BreakerFailure}
		}
		return Result{Class: ClassNetwork, Transient: true, Breaker: BreakerFailure}
	}
	ra := retryAfter(header.Get("Retry-After"), now)
	switch {
	case status >= 200 && status < 300:
		return Result{Delivered: true}
	case status >= 500:
		return Result{Class: ClassHTTP5xx, Transient: true, Breaker: BreakerFailure, RetryAfter: ra}
	case status == http.StatusRequestTimeout || status == http.StatusTooEarly || status == http.StatusTooManyRequests:
		return Result{Class: ClassHTTP4xx, Transient: true, Breaker: BreakerFailure, RetryAfter: ra}
	case status == http.StatusConflict && header.Get("Retry-After") != "":
		return Result{Class: ClassHTTP4xx, Transient: true, Breaker: BreakerNotCounted, RetryAfter: ra}
	case status == http.StatusGone:
		return Result{Class: ClassGone, Pause: true}
	case status >= 400:
		return Result{Class: ClassHTTP4xx}
	}
	return Result{Class: ClassHTTP3xx}
}

// requestError is a request that cannot be built or sent for a reason of
// its own, not the network's: class request.
type requestError struct{ err error }

func (e *requestError) Error() string { return e.err.Error() }
func (e *requestError) Unwrap() error { return e.err }

// errTimeout marks an attempt that outlived its timeout.
var errTimeout = errors.New("attempt timed out")

// maxRetryAfter is the longest Retry-After taken as given; the backoff's
// cap bounds the wait in the end.
const maxRetryAfter = (1 << 31) * time.Second

// retryAfter parses Retry-After: delay seconds or an HTTP date. Seconds
// too many to count (past an int64) mean the longest wait, never none.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseUint(v, 10, 64); err == nil || errors.Is(err, strconv.ErrRange) {
		if err != nil || s > uint64(maxRetryAfter/time.Second) {
			return maxRetryAfter
		}
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return min(t.Sub(now), maxRetryAfter)
	}
	return 0
}

// Backoff is capped exponential backoff with full jitter: before retry n
// (after the n-th failed delivery, from 1), a uniform random wait in
// [0, min(Cap, Base·2^(n-1))).
type Backoff struct {
	Base, Cap time.Duration
	// Rand returns a uniform float64 in [0, 1). Default: math/rand/v2.
	Rand func() float64
}

// Delay is the wait after the n-th failed delivery (n ≥ 1). A receiver's
// Retry-After is honoured within the cap: the wait is at least it.
func (b Backoff) Delay(n int, retryAfter time.Duration) time.Duration {
	ceiling := b.Cap
	if n-1 < 62 {
		if d := b.Base << (n - 1); d > 0 && d < ceiling {
			ceiling = d
		}
	}
	r := rand.Float64
	if b.Rand != nil {
		r = b.Rand
	}
	d := time.Duration(r() * float64(ceiling))
	return min(max(d, retryAfter), b.Cap)
}

// ParseRate parses a rate such as 50/s, 600/m or 3600/h into events per
// second.
func ParseRate(s string) (float64, error) {
	n, unit, ok := strings.Cut(s, "/")
	v, err := strconv.ParseFloat(n, 64)
	if !ok || err != nil || v <= 0 {
		return 0, fmt.Errorf("rate %q: want <n>/s, <n>/m or <n>/h", s)
	}
	switch unit {
	case "s":
		return v, nil
	case "m":
		return v / 60, nil
	case "h":
		return v / 3600, nil
	}
	return 0, fmt.Errorf("rate %q: want <n>/s, <n>/m or <n>/h", s)
}
