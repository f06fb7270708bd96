package console

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"time"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/sender"
)

// The redrive's confirm form carries a one-time token, so that the same
// form posted twice (a double click, a reload, a resubmit from the
// history) moves one batch: every post after the first is shown the
// first one's outcome.
//
// The tokens live in the gateway's store, as dedupe entries, so that
// instances sharing Redis share them: a form previewed on one instance
// and posted to two is still one redrive. A token is one entry, keyed by
// the token itself (nobody can guess it) in the store's "console"
// namespace of claims, and the entry's state is the token's:
//
//	issued  a claim whose lease has already ended (the preview writes it)
//	taken   a live claim: one post is redriving
//	used    a record whose body is the redrive ID (empty: nothing matched)
//	absent  never issued, expired, or given back: refused
//
// Taking a token is the store's atomic claim: of two posts at once, one
// takes over the ended lease and redrives, the other finds the claim live
// and waits for its record. The entry's fingerprint binds the token to
// what it confirms (scope, filter, limit, and the browser's CSRF token):
// a token posted with anything else is refused, and nothing moves.

// OnceStore keeps the confirm tokens: the part of dedupe.Store they use.
// The webhook_console handler hands over the hookgate app's store's
// "console" namespace (store.Lazy.Claims), whose keys no webhook's key
// meets and whose calls are not counted as webhook claims.
type OnceStore interface {
	Claim(ctx context.Context, key string, c dedupe.Claim) (dedupe.ClaimResult, error)
	Record(ctx context.Context, key, token string, rec dedupe.Record, retention time.Duration, now time.Time) error
	Release(ctx context.Context, key, token string) error
}

const (
	// ConfirmTTL is how long a confirm form stays good once previewed,
	// and how long a used one remembers its redrive.
	ConfirmTTL = time.Hour
	// confirmWait is how long a post waits for the outcome of another
	// post of the same form that is still redriving.
	confirmWait = 20 * time.Second
	// confirmPoll is how often it looks.
	confirmPoll = 100 * time.Millisecond
	// issuedSlack backdates an issued token's lease: an instance whose
	// clock lags by less sees it ended too.
	issuedSlack = time.Minute
)

// confirmBinding is what a confirm token confirms, as a fingerprint:
// who may use it (the scope and the browser's CSRF token) and what it
// moves (the filter and the limit).
func confirmBinding(v View, f sender.Filter, limit int, csrf string) dedupe.Fingerprint {
	b, _ := json.Marshal([]any{"redrive", v.Scope, csrf, f.Destination, f.Class,
		f.Since.UTC().Format(time.RFC3339Nano), f.Until.UTC().Format(time.RFC3339Nano), limit})
	return dedupe.FingerprintOf(b)
}

// resendBinding is confirmBinding for a resend of the history entries q
// matches.
func resendBinding(v View, q sender.HistoryQuery, limit int, csrf string) dedupe.Fingerprint {
	b, _ := json.Marshal([]any{"resend", v.Scope, csrf, q.Destination, q.ID, q.Entity, q.State, limit})
	return dedupe.FingerprintOf(b)
}

// issue makes a confirm token bound to fp and keeps it as issued.
func (c *Console) issue(ctx context.Context, fp dedupe.Fingerprint) (string, error) {
	token := rand.Text()
	_, err := c.once.Claim(ctx, token, dedupe.Claim{
		Fingerprint: fp, Token: rand.Text(), Lease: -issuedSlack, Retention: ConfirmTTL, Now: c.now(),
	})
	return token, err
}

// take tries to take token for its one use. It answers the store's
// claim: TookOver (taken: redrive, then settle under claim), InFlight
// (another post holds it), Recorded (used), Mismatch (bound to something
// else), or Claimed: no such token, whose claim it has already taken
// back.
func (c *Console) take(ctx context.Context, token string, fp dedupe.Fingerprint) (claim string, res dedupe.ClaimResult, err error) {
	claim = rand.Text()
	res, err = c.once.Claim(ctx, token, dedupe.Claim{
		// A taken token stays taken until it expires, never taken over:
		// a post that died mid-redrive must not let the same form move a
		// second batch.
		Fingerprint: fp, Token: claim, Lease: ConfirmTTL, Retention: ConfirmTTL, Now: c.now(),
	})
	if err == nil && res.Status == dedupe.Claimed {
		err = c.once.Release(ctx, token, claim)
	}
	return claim, res, err
}

// used records the redrive a taken token made: every later post of the
// form is shown it.
func (c *Console) used(ctx context.Context, token, claim, redriveID string) error {
	return c.once.Record(ctx, token, claim, dedupe.Record{Status: 303, Body: []byte(redriveID)}, ConfirmTTL, c.now())
}

// giveBack returns a taken token that moved nothing to issued, so the
// same form can be posted again.
func (c *Console) giveBack(ctx context.Context, token, claim string, fp dedupe.Fingerprint) error {
	if err := c.once.Release(ctx, token, claim); err != nil {
		return err
	}
	_, err := c.once.Claim(ctx, token, dedupe.Claim{
		Fingerprint: fp, Token: rand.Text(), Lease: -issuedSlack, Retention: ConfirmTTL, Now: c.now(),
	})
	return err
}
