package reconcile

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"time"
)

// HTTP is a Source over a JSON endpoint that pages in key byte order:
// each page is {"items":[{"key","state","version","updated_at"}],"next":
// "<cursor>"}; the first request has no cursor, each next one ?cursor=
// <next>, and the last page's next is empty or absent. Only one page is
// held at a time.
//
// It follows no redirect (a 3xx is an error: the headers carry the
// source's credentials), and a cursor it already sent is an error (the
// endpoint's paging loops). Its errors name the endpoint as
// scheme://host[:port] only, never the URL's user info, path or query,
// where secrets often live.
type HTTP struct {
	URL    string
	Header http.Header // added to every request (auth)
	// Client sends the requests. Default: one with a 30s timeout. Its
	// CheckRedirect is replaced: no redirect is followed.
	Client *http.Client
}

// page is one page of an HTTP source.
type page struct {
	Items []struct {
		Key       string    `json:"key"`
		State     *string   `json:"state"`
		Version   int64     `json:"version"`
		UpdatedAt time.Time `json:"updated_at"`
	} `json:"items"`
	Next string `json:"next"`
}

// maxPage bounds one page's body.
const maxPage = 64 << 20

// errCursorLoop means an HTTP source answered with a cursor that was
// already sent: following it would read the same pages for ever.
var errCursorLoop = errors.New("the endpoint's paging loops: it answered a cursor that was already sent")

// Origin is u's scheme://host[:port]: what an error may say of a URL,
// whose user info, path and query may hold secrets.
func Origin(u *url.URL) string {
	return u.Scheme + "://" + u.Host
}

// Rows implements Source.
func (h HTTP) Rows(ctx context.Context) iter.Seq2[Row, error] {
	return func(yield func(Row, error) bool) {
		base, err := url.Parse(h.URL)
		if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
			// url.Parse's error quotes the whole URL: say nothing of it.
			yield(Row{}, errors.New("http source: the URL is not an http:// or https:// URL with a host"))
			return
		}
		client := &http.Client{Timeout: 30 * time.Second}
		if h.Client != nil {
			c := *h.Client
			client = &c
		}
		client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		// The cursors sent, by hash (a cursor may be long), each with
		// the page it fetched.
		sent := map[[sha256.Size]byte]int{}
		cursor := ""
		for n := 1; ; n++ {
			p, err := h.fetch(ctx, client, base, cursor)
			if err != nil {
				yield(Row{}, fmt.Errorf("http source %s, page %d: %w", Origin(base), n, err))
				return
			}
			for _, it := range p.Items {
				r := Row{Key: it.Key, Version: it.Version, UpdatedAt: it.UpdatedAt}
				if it.State != nil {
					r.State = *it.State
				}
				if !yield(r, nil) {
					return
				}
			}
			if p.Next == "" {
				return
			}
			sum := sha256.Sum256([]byte(p.Next))
			if first, ok := sent[sum]; ok {
				// The cursor is part of the query: not shown.
				yield(Row{}, fmt.Errorf("http source %s, page %d: %w (it fetched page %d)", Origin(base), n, errCursorLoop, first))
				return
			}
			sent[sum] = n + 1
			cursor = p.Next
		}
	}
}

func (h HTTP) fetch(ctx context.Context, client *http.Client, base *url.URL, cursor string) (*page, error) {
	u := *base
	if cursor != "" {
		q := u.Query()
		q.Set("cursor", cursor)
		u.RawQuery = q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, errors.New("the request cannot be built")
	}
	for k, v := range h.Header {
		req.Header[k] = v
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		// A *url.Error quotes the whole URL: keep only its cause.
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err
		}
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }() // a response body: nothing to flush
	// A body that is not read to the end only costs the connection's reuse.
	switch {
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("answered %s: redirects are not followed (they would carry the source's headers); configure the URL the endpoint redirects to", resp.Status)
	case resp.StatusCode != http.StatusOK:
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("answered %s", resp.Status)
	}
	p := new(page)
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxPage)).Decode(p); err != nil {
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err
		}
		return nil, fmt.Errorf("decoding the page: %w", err)
	}
	return p, nil
}
