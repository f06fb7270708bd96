package verify

// The key fetches of the schemes whose provider publishes its keys at a
// URL (sns: a certificate per SigningCertURL; pubsub: Google's JWKS). A
// fetch goes only to a URL the scheme allowed, over HTTPS, bounded in
// size and time; its answer is cached for as long as the scheme says, a
// failure for a minute; concurrent requests for one URL share one fetch;
// and new fetches are rate-limited, so that requests naming many URLs
// cannot make the gateway fetch without end. A key that cannot be fetched
// fails the request with ErrKeyUnavailable (503): never an accept.

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	"golang.org/x/time/rate"
)

// ErrKeyUnavailable means the provider's key could not be fetched: the
// request is neither accepted nor judged forged (503 key_unavailable).
var ErrKeyUnavailable = errors.New("key unavailable")

const (
	// fetchMaxBytes bounds a fetched key document (a certificate, a JWKS).
	fetchMaxBytes = 64 << 10
	// fetchTimeout bounds one fetch, connection included.
	fetchTimeout = 5 * time.Second
	// fetchFailureTTL is how long a failed fetch is remembered before
	// the URL is tried again.
	fetchFailureTTL = time.Minute
	// fetchCacheMax bounds the URLs remembered; past it, the entry that
	// expires first goes.
	fetchCacheMax = 128
)

// fetcher fetches and caches key documents. It is safe for concurrent use.
type fetcher struct {
	client *http.Client
	limit  *rate.Limiter // new fetches: 1 a second, bursts of 10
	group  singleflight.Group

	mu    sync.Mutex
	cache map[string]fetched
}

// fetched is a URL's cached answer: its parsed value, or the failure.
type fetched struct {
	value any
	err   error
	until time.Time
}

// parseFunc reads a fetched document into the value the scheme uses, and
// says how long it may be cached.
type parseFunc func(body []byte, h http.Header) (value any, ttl time.Duration, err error)

// newFetcher returns a fetcher that uses client, or, when client is nil,
// one with the system's roots (SSL_CERT_FILE and SSL_CERT_DIR change
// them), TLS 1.2 at least, and no redirects followed.
func newFetcher(client *http.Client) *fetcher {
	if client == nil {
		client = &http.Client{
			Timeout:   fetchTimeout,
			Transport: &http.Transport{TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12}, Proxy: http.ProxyFromEnvironment},
		}
	}
	c := *client
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	if c.Timeout == 0 || c.Timeout > fetchTimeout {
		c.Timeout = fetchTimeout
	}
	return &fetcher{client: &c, limit: rate.NewLimiter(1, 10), cache: make(map[string]fetched)}
}

// get returns url's document as parse read it, from the cache while it
// holds, or fetched at now. Its errors wrap ErrKeyUnavailable and name the
// URL, never a key.
func (f *fetcher) get(ctx context.Context, url string, now time.Time, parse parseFunc) (any, error) {
	f.mu.Lock()
	c, ok := f.cache[url]
	f.mu.Unlock()
	if ok && now.Before(c.until) {
		return c.value, c.err
	}
	return f.fetchShared(ctx, url, now, parse, true)
}

// fetchShared fetches url once for every caller waiting on it, within the
// rate limit (a refusal is not remembered: the URL itself did not fail),
// and caches the answer, or, unless failures too, only a success.
func (f *fetcher) fetchShared(ctx context.Context, url string, now time.Time, parse parseFunc, failures bool) (any, error) {
	v, _, _ := f.group.Do(url, func() (any, error) {
		if !f.limit.AllowN(now, 1) {
			return fetched{err: fmt.Errorf("%w: too many new key URLs; %s not fetched", ErrKeyUnavailable, url)}, nil
		}
		c := f.fetch(ctx, url, now, parse)
		if failures || c.err == nil {
			f.remember(url, c, now)
		}
		return c, nil
	})
	c := v.(fetched)
	return c.value, c.err
}

// fetch fetches and parses url once.
func (f *fetcher) fetch(ctx context.Context, url string, now time.Time, parse parseFunc) fetched {
	failed := func(why string) fetched {
		return fetched{err: fmt.Errorf("%w: %s: %s", ErrKeyUnavailable, url, why), until: now.Add(fetchFailureTTL)}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), fetchTimeout) // a caller gone must not fail the others waiting
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return failed("not a URL")
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return failed(fetchError(err))
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return failed("answered " + resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, fetchMaxBytes+1))
	switch {
	case err != nil:
		return failed("the answer broke off")
	case len(body) > fetchMaxBytes:
		return failed(fmt.Sprintf("the answer is over %d bytes", fetchMaxBytes))
	}
	value, ttl, err := parse(body, resp.Header)
	if err != nil {
		return failed(err.Error())
	}
	return fetched{value: value, until: now.Add(ttl)}
}

// fetchError is a fetch's failure in words, without Go's wrapping of the
// URL (the caller names it once).
func fetchError(err error) string {
	var uerr interface{ Unwrap() error }
	if errors.As(err, &uerr) {
		if inner := uerr.Unwrap(); inner != nil {
			return inner.Error()
		}
	}
	return err.Error()
}

// remember caches c for url, dropping the entry that expires first when
// the cache is full.
func (f *fetcher) remember(url string, c fetched, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.cache[url]; !ok && len(f.cache) >= fetchCacheMax {
		first := ""
		for u, e := range f.cache {
			if !now.Before(e.until) {
				first = u
				break
			}
			if first == "" || e.until.Before(f.cache[first].until) {
				first = u
			}
		}
		delete(f.cache, first)
	}
	f.cache[url] = c
}

// refresh fetches url again, and keeps the answer only when the fetch
// succeeds: a failure leaves the cached answer in use.
func (f *fetcher) refresh(ctx context.Context, url string, now time.Time, parse parseFunc) (any, error) {
	return f.fetchShared(ctx, url, now, parse, false)
}
