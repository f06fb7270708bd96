package console

import (
	"maps"
	"slices"

	"github.com/hookgate/hookgate/sender"
)

// received is what durable ingress kept of an envelope's request, as its
// detail page shows it.
type received struct {
	Source, Path string
	// Headers are the kept headers by name, each value on its line, the
	// values redact_headers names masked.
	Headers []header
}

// receivedOf is r for a detail page: nil when the envelope kept nothing
// (enqueued through the API, or its payload, which holds it, expired).
// Only r.Shown is read: a redacted value never reaches the page.
func receivedOf(r *sender.Received) *received {
	if r == nil {
		return nil
	}
	out := &received{Source: r.Source, Path: r.Path}
	h := r.Shown()
	for _, k := range slices.Sorted(maps.Keys(h)) {
		for _, val := range h[k] {
			out.Headers = append(out.Headers, header{k, val})
		}
	}
	return out
}
