package sender

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"time"
)

// Class is the failure class of an attempt.
type Class int

// The failure classes. Only the transient ones (network, timeout, 5xx,
// 408/425/429 and hookgate's own 409s with Retry-After) are retried and
// count toward the breaker.
const (
	ClassNone Class = iota
	ClassNetwork
	ClassTimeout
	ClassHTTP5xx
	ClassHTTP4xx
	ClassHTTP3xx
	ClassGone
)

var classNames = [...]string{"", "network", "timeout", "http_5xx", "http_4xx", "http_3xx", "gone"}

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
	return 0, fmt.Errorf("unknown error class %q (want network, timeout, http_5xx, http_4xx, http_3xx or gone)", s)
}

// Transient reports whether an attempt of class c is retried.
func (c Class) Transient() bool {
	return c == ClassNetwork || c == ClassTimeout || c == ClassHTTP5xx
}

// Result is what one attempt's response (or error) means.
type Result struct {
	Delivered bool
	Class     Class // when not delivered
	// Transient failures are retried; others go to the dead-letter queue.
	Transient bool
	// RetryAfter is the receiver's Retry-After, if it gave one.
	RetryAfter time.Duration
	// Pause is set for 410 Gone: the destination is paused.
	Pause bool
}

// Classify judges one attempt: a 2xx is delivered; a network error, a
// timeout, 408, 425, 429, a 5xx, and hookgate's own 409 answers that carry
// Retry-After (in_flight, entity_busy) are transient; other 4xx and 3xx
// are permanent, and 410 also pauses the destination. Redirects are never
// followed: a 3xx is the receiver's answer.
func Classify(status int, header http.Header, err error, now time.Time) Result {
	if err != nil {
		var ne net.Error
		if errors.Is(err, errTimeout) || (errors.As(err, &ne) && ne.Timeout()) {
			return Result{Class: ClassTimeout, Transient: true}
		}
		return Result{Class: ClassNetwork, Transient: true}
	}
	ra := retryAfter(header.Get("Retry-After"), now)
	switch {
	case status >= 200 && status < 300:
		return Result{Delivered: true}
	case status >= 500:
		return Result{Class: ClassHTTP5xx, Transient: true, RetryAfter: ra}
	case status == http.StatusRequestTimeout || status == http.StatusTooEarly || status == http.StatusTooManyRequests:
		return Result{Class: ClassHTTP4xx, Transient: true, RetryAfter: ra}
	case status == http.StatusConflict && header.Get("Retry-After") != "":
		return Result{Class: ClassHTTP4xx, Transient: true, RetryAfter: ra}
	case status == http.StatusGone:
		return Result{Class: ClassGone, Pause: true}
	case status >= 400:
		return Result{Class: ClassHTTP4xx}
	}
	return Result{Class: ClassHTTP3xx}
}

// errTimeout marks an attempt that outlived its timeout.
var errTimeout = errors.New("attempt timed out")

// retryAfter parses Retry-After: delay seconds or an HTTP date.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil && s >= 0 {
		return time.Duration(min(s, 1<<31)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
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
