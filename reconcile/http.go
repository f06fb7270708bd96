package reconcile

import (
	"context"
	"encoding/json"
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
type HTTP struct {
	URL    string
	Header http.Header // added to every request (auth)
	// Client sends the requests. Default: one with a 30s timeout.
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

// Rows implements Source.
func (h HTTP) Rows(ctx context.Context) iter.Seq2[Row, error] {
	return func(yield func(Row, error) bool) {
		client := h.Client
		if client == nil {
			client = &http.Client{Timeout: 30 * time.Second}
		}
		cursor := ""
		for pages := 0; ; pages++ {
			p, err := h.fetch(ctx, client, cursor)
			if err != nil {
				yield(Row{}, fmt.Errorf("http source, page %d: %w", pages+1, err))
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
			if p.Next == cursor {
				yield(Row{}, fmt.Errorf("http source: the endpoint answered the same cursor %q again", cursor))
				return
			}
			cursor = p.Next
		}
	}
}

func (h HTTP) fetch(ctx context.Context, client *http.Client, cursor string) (*page, error) {
	u, err := url.Parse(h.URL)
	if err != nil {
		return nil, err
	}
	if cursor != "" {
		q := u.Query()
		q.Set("cursor", cursor)
		u.RawQuery = q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	for k, v := range h.Header {
		req.Header[k] = v
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("%s answered %s", h.URL, resp.Status)
	}
	p := new(page)
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxPage)).Decode(p); err != nil {
		return nil, fmt.Errorf("decoding the page: %w", err)
	}
	return p, nil
}
