// Package lease holds what the two rules (dedupe's claims, freshness's
// entity leases) do when a lease's write fails or has to wait: sleep
// until a context ends, retry a write with capped backoff until its lease
// ends, and release in the background a lease whose acquire lost its
// reply. None of it runs on a request that the store answers at once.
package lease

import (
	"context"
	"time"
)

// MaxLostReleases bounds the lost leases being released at once by one
// rule; beyond it, a lost lease is left to end by itself.
const MaxLostReleases = 1024

// Sleep waits for d, or until ctx ends (its error).
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Retry calls f until it succeeds or ctx ends, with capped exponential
// backoff, waiting before the first call too; it returns f's last error.
func Retry(ctx context.Context, sleep func(context.Context, time.Duration) error, f func() error) error {
	backoff := 50 * time.Millisecond
	err := ctx.Err()
	for sleep(ctx, backoff) == nil {
		if err = f(); err == nil {
			return nil
		}
		backoff = min(2*backoff, time.Second)
	}
	return err
}

// Releases runs the background releases of one rule, at most
// MaxLostReleases at once.
type Releases chan struct{}

// NewReleases returns the releases' slots.
func NewReleases() Releases { return make(Releases, MaxLostReleases) }

// Release runs release on a goroutine of its own, retried until it
// succeeds or until ends, if a slot is free; otherwise (too many at once)
// the lease is left to end by itself.
func (slots Releases) Release(sleep func(context.Context, time.Duration) error, until time.Time, release func(context.Context) error) {
	select {
	case slots <- struct{}{}:
	default:
		return
	}
	go func() {
		defer func() { <-slots }()
		ctx, cancel := context.WithDeadline(context.Background(), until)
		defer cancel()
		// Past until the lease ends by itself: the last error has no one to go to.
		_ = Retry(ctx, sleep, func() error { return release(ctx) })
	}()
}
