// Package destinations keeps the sender's destinations made at run time,
// through the admin API: their records in the store beside the queue (a
// Backend: the embedded bbolt file or Redis), their secrets and header
// values sealed with AES-256-GCM under the secrets key, and the loop that
// applies every change, made on any instance, to this instance's sender
// (sender.Apply) within a poll. The Caddyfile's destinations (static)
// live beside them and win a name clash.
//
// Polling reads one version number; an idle instance writes nothing.
package destinations

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hookgate/hookgate/internal/replicas"
	"github.com/hookgate/hookgate/sender"
)

// DefaultPoll is how often an instance reads the records' version.
const DefaultPoll = 500 * time.Millisecond

// DefaultExpirePrevious is how long a rotation's previous secret keeps
// signing when the rotate does not say.
const DefaultExpirePrevious = 24 * time.Hour

// Errors of the registry; InvalidError is a destination refused as given.
var (
	// ErrNotFound: no destination of that name was made through the API.
	ErrNotFound = errors.New("no destination of that name was made through the API")
	// ErrStatic: the name is the Caddyfile's; change it there.
	ErrStatic = errors.New("the destination is configured in the Caddyfile")
	// ErrUnreadable: its stored record does not open here (sealed under
	// another secrets_key): it can be deleted, not read or changed.
	ErrUnreadable = errors.New("the destination's stored record does not open: start the gateway with the secrets_key it was made under, or delete it")
)

// NotAllowedError is a URL the SSRF guard refuses: 422
// destination_not_allowed. Its message names the rule, not the URL.
type NotAllowedError struct{ Err error }

func (e NotAllowedError) Error() string { return e.Err.Error() }
func (e NotAllowedError) Unwrap() error { return e.Err }

// Options are a Registry's dependencies.
type Options struct {
	// Key seals the secrets at rest (KeyLen bytes, ParseKey); nil keeps
	// them plain.
	Key []byte
	// Static are the Caddyfile's destinations, applied first and in
	// their order; an API record of one's name is left out.
	Static []sender.Destination
	// Apply makes a set of destinations the sender's (sender.Apply).
	Apply func([]sender.Destination) error
	// Check is the SSRF guard's check of a URL at create and update
	// (its error names the rule); nil checks nothing.
	Check func(ctx context.Context, rawURL string) error
	// Poll is how often Run reads the version; default DefaultPoll.
	Poll   time.Duration
	Now    func() time.Time
	Logger *slog.Logger
}

// Registry is the destinations made through the API, as the backend
// holds them, and their application to the sender.
type Registry struct {
	backend Backend
	seal    sealer
	opts    Options

	mu      sync.Mutex // serializes Sync
	loaded  bool
	version uint64
	applied map[string]*entry // those applied
	bad     map[string]string // name -> why it is left out, logged once per version
}

// New returns the registry over backend. Nothing is read until Sync.
func New(backend Backend, opts Options) (*Registry, error) {
	s, err := newSealer(opts.Key)
	if err != nil {
		return nil, err
	}
	if opts.Poll <= 0 {
		opts.Poll = DefaultPoll
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Apply == nil {
		opts.Apply = func([]sender.Destination) error { return nil }
	}
	return &Registry{backend: backend, seal: s, opts: opts}, nil
}

// Run syncs every Poll until ctx ends. A failure is logged once while it
// lasts; the destinations applied stay as they are meanwhile.
func (r *Registry) Run(ctx context.Context) {
	t := time.NewTicker(r.opts.Poll)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := r.Sync(ctx)
		switch {
		case err != nil && !failing && ctx.Err() == nil:
			r.opts.Logger.Error("reading the API's destinations failed: the ones applied stay until the store answers", "error", err)
		case err == nil && failing:
			r.opts.Logger.Info("reading the API's destinations works again")
		}
		failing = err != nil
	}
}

// Sync reads the version and, when it moved, every record, and applies
// them beside the static destinations. A record that does not open or
// build (another secrets key, a static name) is left out and logged; the
// others apply.
func (r *Registry) Sync(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, err := r.backend.Version(ctx)
	if err != nil {
		return err
	}
	if r.loaded && v == r.version {
		return nil
	}
	all, v, err := r.backend.All(ctx)
	if err != nil {
		return err
	}
	static := map[string]bool{}
	for _, d := range r.opts.Static {
		static[d.Name] = true
	}
	applied, bad := make(map[string]*entry, len(all)), map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(all)) {
		sum := sha256.Sum256(all[name])
		if prev, ok := r.applied[name]; ok && prev.sum == sum && !static[name] {
			applied[name] = prev // unchanged: neither opened nor built again
			continue
		}
		o, err := unmarshal(r.seal, all[name])
		if err == nil && static[name] {
			err = errors.New("the Caddyfile configures a destination of this name: it wins")
		}
		var d sender.Destination
		if err == nil {
			d, err = o.build()
			d.Rev = versionOf(sum)
		}
		if err != nil {
			bad[name] = err.Error()
			if r.bad[name] != bad[name] {
				r.opts.Logger.Error("an API destination is left out", "destination", name, "error", err)
			}
			continue
		}
		applied[name] = &entry{sum: sum, dest: d, created: o.Created}
	}
	built := make([]*entry, 0, len(applied))
	for _, e := range applied {
		built = append(built, e)
	}
	slices.SortFunc(built, func(a, b *entry) int {
		return cmp.Or(a.created.Compare(b.created), cmp.Compare(a.dest.Name, b.dest.Name))
	})
	dests := slices.Grow(slices.Clone(r.opts.Static), len(built))
	for _, e := range built {
		dests = append(dests, e.dest)
	}
	if err := r.opts.Apply(dests); err != nil {
		return fmt.Errorf("applying the API's destinations: %w", err)
	}
	r.loaded, r.version, r.applied, r.bad = true, v, applied, bad
	return nil
}

// entry is an applied record: the digest of its stored form (what tells
// a changed record at the next sync), and the sender's destination.
type entry struct {
	sum     [sha256.Size]byte
	dest    sender.Destination
	created time.Time
}

// Get is the API's destination name as the store holds it, when it is
// applied here.
func (r *Registry) Get(ctx context.Context, name string) (View, bool, error) {
	r.mu.Lock()
	_, ok := r.applied[name]
	r.mu.Unlock()
	if !ok {
		return View{}, false, nil
	}
	raw, err := r.backend.Get(ctx, name)
	if err != nil || raw == nil {
		return View{}, false, err
	}
	o, err := unmarshal(r.seal, raw)
	if err != nil {
		return View{}, false, fmt.Errorf("%w: destination %q: %v", ErrUnreadable, name, err)
	}
	v := o.view(r.opts.Now())
	v.Version = versionOf(sha256.Sum256(raw))
	return v, true, nil
}

// isStatic reports whether the Caddyfile configures name.
func (r *Registry) isStatic(name string) bool {
	return slices.ContainsFunc(r.opts.Static, func(d sender.Destination) bool { return d.Name == name })
}

// Create stores a new destination and applies it here at once (the other
// instances within a poll). Its answer carries the secret, this once.
// ErrExists when the name is taken, here or in the Caddyfile;
// InvalidError or NotAllowedError when it is refused.
func (r *Registry) Create(ctx context.Context, s Spec) (View, error) {
	if strings.Contains(s.Name, "/") {
		return View{}, invalid("name %q: no slash: a tenant's destination is created with tenant set, and named <tenant>/<name>", s.Name)
	}
	if s.Tenant != "" {
		if err := sender.CheckTenant(s.Tenant); err != nil {
			return View{}, InvalidError{err}
		}
		s.Name = sender.Qualify(s.Tenant, s.Name)
	}
	if r.isStatic(s.Name) {
		return View{}, fmt.Errorf("%w: %q is configured in the Caddyfile", ErrExists, s.Name)
	}
	now := r.opts.Now().UTC()
	o := &opened{record: record{Name: s.Name, URL: s.URL, Scheme: cmp.Or(s.Scheme, "standard"), Events: s.Events,
		Workers: s.Workers, Rate: s.Rate, Description: s.Description, Metadata: s.Metadata, Created: now, Updated: now, Rev: 1},
		secret: cmp.Or(s.Secret, newSecret()), headers: s.Headers}
	if err := r.check(ctx, o); err != nil {
		return View{}, err
	}
	raw, err := o.marshal(r.seal)
	if err != nil {
		return View{}, err
	}
	if err := r.backend.Put(ctx, o.Name, nil, raw); err != nil {
		if errors.Is(err, ErrExists) {
			return View{}, fmt.Errorf("%w: %q", ErrExists, s.Name)
		}
		var short *replicas.Shortfall
		if errors.As(err, &short) {
			return View{}, fmt.Errorf("%w; destination %q may have been created all the same: GET it, and rotate its secret if it was", err, s.Name)
		}
		return View{}, err
	}
	if r.seal.aead == nil {
		r.opts.Logger.Warn("destination created with its secret kept plain in the store: set secrets_key to seal it", "destination", o.Name)
	}
	r.applyNow(ctx)
	v := o.view(now)
	v.Secret, v.Version = o.secret, versionOf(sha256.Sum256(raw))
	return v, nil
}

// applyNow applies here a change just stored. A failure is logged, not
// answered: the change is made, and the next poll applies it.
func (r *Registry) applyNow(ctx context.Context) {
	if err := r.Sync(context.WithoutCancel(ctx)); err != nil {
		r.opts.Logger.Error("a destination changed, and applying it here failed: the next poll applies it", "error", err)
	}
}

// check refuses o unless it is well formed, builds, and its URL passes
// the guard.
func (r *Registry) check(ctx context.Context, o *opened) error {
	if err := o.checkFields(); err != nil {
		return err
	}
	if _, err := o.build(); err != nil {
		return err
	}
	if r.opts.Check != nil {
		if err := r.opts.Check(ctx, o.URL); err != nil {
			return NotAllowedError{fmt.Errorf("destination %q: %w", o.Name, err)}
		}
	}
	return nil
}

// Update applies p to the destination name. ErrNotFound, ErrStatic,
// InvalidError, NotAllowedError.
func (r *Registry) Update(ctx context.Context, name string, p Patch) (View, error) {
	return r.change(ctx, name, func(o *opened) error {
		if p.URL != nil {
			o.URL = *p.URL
		}
		if p.Events != nil {
			o.Events = *p.Events
		}
		if p.Workers != nil {
			o.Workers = *p.Workers
		}
		if p.Rate != nil {
			o.Rate = *p.Rate
		}
		if p.Headers != nil {
			o.headers = *p.Headers
		}
		if p.Description != nil {
			o.Description = *p.Description
		}
		if p.Metadata != nil {
			o.Metadata = *p.Metadata
		}
		return nil
	})
}

// Rotate makes a new secret the destination's (secret, or a new one when
// ""), the current one signing beside it for expire (0: not at all).
// The answer carries the new secret, this once.
func (r *Registry) Rotate(ctx context.Context, name, secret string, expire time.Duration) (View, error) {
	if expire < 0 {
		return View{}, invalid("expire_previous_after must not be negative")
	}
	secret = cmp.Or(secret, newSecret())
	v, err := r.change(ctx, name, func(o *opened) error {
		o.previous, o.PreviousUntil = o.secret, r.opts.Now().UTC().Add(expire)
		if expire == 0 {
			o.previous, o.PreviousUntil = "", time.Time{}
		}
		o.secret = secret
		return nil
	})
	if err == nil {
		v.Secret = secret
	}
	return v, err
}

// change reads name's record, applies fn, checks and stores it, and
// applies it here; a change made meanwhile elsewhere is read and fn
// applied again.
func (r *Registry) change(ctx context.Context, name string, fn func(*opened) error) (View, error) {
	if r.isStatic(name) {
		return View{}, fmt.Errorf("%w: %q: change it there", ErrStatic, name)
	}
	for range 3 {
		old, err := r.current(ctx, name)
		if err != nil {
			return View{}, err
		}
		o, err := unmarshal(r.seal, old)
		if err != nil {
			return View{}, fmt.Errorf("%w: destination %q: %v", ErrUnreadable, name, err)
		}
		if err := fn(o); err != nil {
			return View{}, err
		}
		o.Rev++
		o.Updated = r.opts.Now().UTC()
		if err := r.check(ctx, o); err != nil {
			return View{}, err
		}
		raw, err := o.marshal(r.seal)
		if err != nil {
			return View{}, err
		}
		err = r.backend.Put(ctx, name, old, raw)
		if errors.Is(err, ErrChanged) {
			continue // changed meanwhile: read it again
		}
		if err != nil {
			return View{}, err
		}
		r.applyNow(ctx)
		v := o.view(r.opts.Now())
		v.Version = versionOf(sha256.Sum256(raw))
		return v, nil
	}
	return View{}, fmt.Errorf("destination %q: %w three times: try again", name, ErrChanged)
}

// current is name's record as the store holds it.
func (r *Registry) current(ctx context.Context, name string) ([]byte, error) {
	raw, err := r.backend.Get(ctx, name)
	if err != nil {
		return nil, err
	}
	if raw == nil {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	return raw, nil
}

// Delete removes the destination name's record and applies it here: its
// envelopes stay in the store, an orphan's (the caller moves or purges
// them). ErrNotFound, ErrStatic.
func (r *Registry) Delete(ctx context.Context, name string) error {
	if r.isStatic(name) {
		return fmt.Errorf("%w: %q: remove it there", ErrStatic, name)
	}
	for range 3 {
		old, err := r.current(ctx, name)
		if err != nil {
			return err
		}
		err = r.backend.Put(ctx, name, old, nil)
		if errors.Is(err, ErrChanged) {
			continue // changed meanwhile: read it again
		}
		if err != nil {
			return err
		}
		r.applyNow(ctx)
		return nil
	}
	return fmt.Errorf("destination %q: %w three times: try again", name, ErrChanged)
}

// Owns reports whether name is a destination made through the API, as
// last synced: applied, or left out.
func (r *Registry) Owns(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, applied := r.applied[name]
	_, bad := r.bad[name]
	return applied || bad
}
