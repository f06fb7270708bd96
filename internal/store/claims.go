package store

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/hookgate/hookgate/dedupe"
)

// webhookNamespace labels the latency of the webhooks' own calls: the
// dedupe entries, claimed under the delivery's key as it is.
const webhookNamespace = "webhook"

// Claims is a namespace of claims in the store, for a use other than a
// webhook's dedupe entry: the console's confirm tokens (Claims("console")),
// the reconcile jobs' slot locks (Claims("reconcile")). Its keys are
// prefixed with the namespace, so that no webhook key meets them, and the
// latency of its calls is labelled with it, so that they are not counted
// as webhook claims.
type Claims struct {
	l      *Lazy
	prefix string
	attrs  [numOps][]metric.RecordOption
}

// Claims returns the namespace's claims in l's store.
func (l *Lazy) Claims(namespace string) *Claims {
	return &Claims{l: l, prefix: claimsPrefix(namespace), attrs: opAttrs(l.backend, namespace)}
}

// claimsPrefix starts the keys of a namespace: "\x00<namespace>/", which
// no webhook's key starts with. The console's keep the prefix its tokens
// had before namespaces, so that a form previewed before an upgrade still
// confirms after it.
func claimsPrefix(namespace string) string {
	if namespace == "console" {
		return "hookgate-console-confirm:"
	}
	return "\x00" + namespace + "/"
}

// done records the latency of o, begun at start.
func (c *Claims) done(ctx context.Context, o op, start time.Time) {
	c.l.duration.Record(ctx, time.Since(start).Seconds(), c.attrs[o]...)
}

// Claim is dedupe.Store's Claim, of the key in the namespace.
func (c *Claims) Claim(ctx context.Context, key string, cl dedupe.Claim) (dedupe.ClaimResult, error) {
	s, start, err := c.l.state()
	if err != nil {
		return dedupe.ClaimResult{}, err
	}
	defer c.done(ctx, opClaim, start)
	res, err := s.Claim(ctx, c.prefix+key, cl)
	c.l.writes.report(err, claimed(res))
	return res, err
}

// Record is dedupe.Store's Record, of the key in the namespace.
func (c *Claims) Record(ctx context.Context, key, token string, rec dedupe.Record, retention time.Duration, now time.Time) error {
	s, start, err := c.l.state()
	if err != nil {
		return err
	}
	defer c.done(ctx, opRecord, start)
	err = s.Record(ctx, c.prefix+key, token, rec, retention, now)
	c.l.writes.report(err, true)
	return err
}

// Release is dedupe.Store's Release, of the key in the namespace.
func (c *Claims) Release(ctx context.Context, key, token string) error {
	s, start, err := c.l.state()
	if err != nil {
		return err
	}
	defer c.done(ctx, opRelease, start)
	err = s.Release(ctx, c.prefix+key, token)
	c.l.writes.report(err, false)
	return err
}
