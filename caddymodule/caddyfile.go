package caddymodule

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/dustin/go-humanize"

	"github.com/hookgate/hookgate/internal/suggest"
	"github.com/hookgate/hookgate/sender"
)

func init() {
	httpcaddyfile.RegisterGlobalOption("hookgate", parseGlobalOption)
}

// parseGlobalOption parses the hookgate global option, merging repeated
// hookgate blocks; the syntax is on [App.UnmarshalCaddyfile].
func parseGlobalOption(d *caddyfile.Dispenser, existing any) (any, error) {
	app := new(App)
	if existing != nil {
		if err := json.Unmarshal(existing.(httpcaddyfile.App).Value, app); err != nil {
			return nil, err
		}
	}
	if err := app.UnmarshalCaddyfile(d); err != nil {
		return nil, err
	}
	return httpcaddyfile.App{Name: "hookgate", Value: caddyconfig.JSON(app, nil)}, nil
}

// UnmarshalCaddyfile sets up the app from the hookgate global option's
// Caddyfile tokens. Syntax:
//
//	hookgate {
//		store redis <url>... {
//			sentinel_master <name>
//		}
//		store file [<dir>]
//		key_prefix <prefix>
//		sender { ... }
//		destination <name> { ... }
//		reconcile <name> { ... }
//	}
//
// The store defaults to file in caddy.AppDataDir()/hookgate, key_prefix to
// hookgate. destination and reconcile repeat, one block per name;
// docs/sending.md ("The sender") and docs/reconcile.md give their blocks. Repeated
// hookgate blocks merge; a subdirective or a name given twice is an error.
func (a *App) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	// What an earlier hookgate block set counts as given.
	once := func(given bool, parse subdirective) subdirective {
		if given {
			return func(d *caddyfile.Dispenser) error { return d.Errf("%s given twice", d.Val()) }
		}
		return parse
	}
	return parseDirective(d, nil, "hookgate", block{
		{"store", once(a.Store != nil, func(d *caddyfile.Dispenser) error {
			a.Store = new(StoreConfig)
			return a.Store.unmarshalCaddyfile(d)
		})},
		{"key_prefix", once(a.KeyPrefix != "", stringArg(&a.KeyPrefix))},
		{"sender", once(a.Sender != nil, func(d *caddyfile.Dispenser) error {
			if d.NextArg() {
				return d.ArgErr()
			}
			a.Sender = new(SenderConfig)
			return a.Sender.unmarshalCaddyfile(d)
		})},
		{"reconcile", func(d *caddyfile.Dispenser) error {
			if !d.NextArg() {
				return d.Err("reconcile needs a job name")
			}
			job := &ReconcileJob{Name: d.Val()}
			if d.NextArg() {
				return d.ArgErr()
			}
			if slices.ContainsFunc(a.Reconcile, func(o *ReconcileJob) bool { return o.Name == job.Name }) {
				return d.Errf("reconcile %q given twice", job.Name)
			}
			a.Reconcile = append(a.Reconcile, job)
			return job.unmarshalCaddyfile(d)
		}},
		{"destination", func(d *caddyfile.Dispenser) error {
			if !d.NextArg() {
				return d.Err("destination needs a name")
			}
			dc := &DestinationConfig{Name: d.Val()}
			if d.NextArg() {
				return d.ArgErr()
			}
			if slices.ContainsFunc(a.Destinations, func(o *DestinationConfig) bool { return o.Name == dc.Name }) {
				return d.Errf("destination %q given twice", dc.Name)
			}
			a.Destinations = append(a.Destinations, dc)
			return dc.unmarshalCaddyfile(d)
		}},
	}, "reconcile", "destination")
}

// unmarshalCaddyfile parses the store subdirective, d on its name.
func (sc *StoreConfig) unmarshalCaddyfile(d *caddyfile.Dispenser) error {
	if !d.NextArg() {
		return d.ArgErr()
	}
	sc.Backend = d.Val()
	args := d.RemainingArgs()
	switch sc.Backend {
	case "file":
		if len(args) > 1 {
			return d.Errf("store file takes one directory, got %d", len(args))
		}
		if len(args) == 1 {
			sc.Dir = args[0]
		}
	case "redis":
		if len(args) == 0 {
			return d.Err("store redis needs at least one redis:// or rediss:// URL")
		}
		sc.URLs = args
	default:
		return d.Errf("unknown store backend %q (want file or redis)", sc.Backend)
	}
	return parseBlock(d, "store", block{
		{"sentinel_master", func(d *caddyfile.Dispenser) error {
			if sc.Backend != "redis" {
				return d.ArgErr()
			}
			return stringArg(&sc.SentinelMaster)(d)
		}},
	})
}

// unmarshalCaddyfile parses the sender block:
//
//	sender {
//		workers   <n>
//		attempts  <n>
//		backoff   <base> <cap>
//		timeout   <duration>
//		lease     <duration>
//		retention <duration>
//		history   <duration>
//		history_payload <duration>
//		max_redrive <n>
//		breaker {
//			failures  <n>
//			open      <duration>
//			half_open <n>
//		}
//	}
func (sc *SenderConfig) unmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return parseBlock(d, "sender", block{
		{"workers", intArg(&sc.Workers)},
		{"attempts", intArg(&sc.Attempts)},
		{"backoff", func(d *caddyfile.Dispenser) (err error) {
			args := d.RemainingArgs()
			if len(args) != 2 {
				return d.Errf("backoff: want <base> <cap>, e.g. backoff 2s 15m")
			}
			if sc.Backoff, err = positiveDuration(d, "backoff", args[0]); err != nil {
				return err
			}
			if sc.BackoffCap, err = positiveDuration(d, "backoff", args[1]); err != nil {
				return err
			}
			if sc.BackoffCap < sc.Backoff {
				return d.Errf("backoff: the cap %s is under the base %s", time.Duration(sc.BackoffCap), time.Duration(sc.Backoff))
			}
			return nil
		}},
		{"timeout", durationArg(&sc.Timeout)},
		{"lease", durationArg(&sc.Lease)},
		{"retention", durationArg(&sc.Retention)},
		{"max_redrive", intArg(&sc.MaxRedrive)},
		{"history", durationArg(&sc.History)},
		{"history_payload", func(d *caddyfile.Dispenser) error {
			v, err := oneArg(d)
			if err != nil {
				return err
			}
			dur, err := caddy.ParseDuration(v)
			if err != nil || dur < 0 { // 0 keeps no payload
				return d.Errf("history_payload: want a positive duration, got %q", v)
			}
			sc.HistoryPayload = (*caddy.Duration)(&dur)
			return nil
		}},
		{"breaker", func(d *caddyfile.Dispenser) error {
			if d.NextArg() {
				return d.ArgErr()
			}
			b := new(BreakerConfig)
			sc.Breaker = b
			return parseBlock(d, "breaker", block{
				{"failures", intArg(&b.Failures)},
				{"open", durationArg(&b.Open)},
				{"half_open", intArg(&b.HalfOpen)},
			})
		}},
	})
}

// unmarshalCaddyfile parses a destination block:
//
//	destination <name> {
//		url     <url>
//		scheme  <scheme>
//		secret  <secret>
//		key_id  <keyid>    # rfc9421: the keyid the signature names
//		workers <n>
//		rate    <n>/s|m|h
//		events  <glob>...
//	}
func (dc *DestinationConfig) unmarshalCaddyfile(d *caddyfile.Dispenser) error {
	err := parseBlock(d, "destination", block{
		{"url", stringArg(&dc.URL)},
		{"scheme", stringArg(&dc.Scheme)},
		{"secret", stringArg(&dc.Secret)},
		{"key_id", stringArg(&dc.KeyID)},
		{"workers", intArg(&dc.Workers)},
		{"rate", func(d *caddyfile.Dispenser) error {
			v, err := oneArg(d)
			if err == nil {
				if dc.Rate, err = sender.ParseRate(v); err != nil {
					return d.WrapErr(err)
				}
			}
			return err
		}},
		{"events", func(d *caddyfile.Dispenser) error {
			if dc.Events = d.RemainingArgs(); len(dc.Events) == 0 {
				return d.Errf("destination %s: events needs at least one event type glob, e.g. events reservation.* seat.released", dc.Name)
			}
			return nil
		}},
	})
	switch {
	case err != nil:
		return err
	case dc.URL == "":
		return d.Errf("destination %s needs a url", dc.Name)
	case dc.Secret == "":
		return d.Errf("destination %s needs a secret", dc.Name)
	}
	return nil
}

// parseHandler parses handler directive T, which unmarshals itself.
func parseHandler[T any, PT interface {
	*T
	caddyhttp.MiddlewareHandler
	caddyfile.Unmarshaler
}](h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	m := PT(new(T))
	return m, m.UnmarshalCaddyfile(h.Dispenser)
}

// parseDirective parses a directive (or a global option), d before its
// name: the one argument its line may have, into *arg (nil: it takes
// none), then its block.
func parseDirective(d *caddyfile.Dispenser, arg *string, name string, subs block, repeats ...string) error {
	d.Next() // consume the directive's name
	if arg != nil && d.NextArg() {
		*arg = d.Val()
	}
	if d.NextArg() {
		return d.ArgErr()
	}
	return parseBlock(d, name, subs, repeats...)
}

// A subdirective parses one line of a block, d on its name: it reads the
// line's arguments, and its own block if it has one.
type subdirective func(d *caddyfile.Dispenser) error

// block lists the subdirectives of a Caddyfile block, in the order of its
// syntax.
type block []struct {
	name  string
	parse subdirective
}

// parseBlock parses the block that opens on d's line, if one does: the
// Caddy idiom of for d.NextBlock and switch d.Val(), with subs for the
// switch. A subdirective not in subs is an error that names the block
// and the nearest subdirective, when it looks like a typo of one, else
// lists them all. One given twice is an error, unless repeats names it;
// the error names a nested block (Caddy's names the directive). A
// subdirective with a block of its own parses it with parseBlock in turn.
func parseBlock(d *caddyfile.Dispenser, name string, subs block, repeats ...string) error {
	seen := map[string]bool{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		sub := d.Val()
		var parse subdirective
		known := make([]string, 0, len(subs))
		for _, s := range subs {
			if s.name == sub {
				parse = s.parse
			}
			known = append(known, s.name)
		}
		if parse == nil {
			if near := suggest.Closest(sub, known); near != "" {
				return d.Errf("unknown %s subdirective %q; did you mean %q?", name, sub, near)
			}
			return d.Errf("unknown %s subdirective %q (want one of %s)", name, sub, strings.Join(known, ", "))
		}
		if seen[sub] && !slices.Contains(repeats, sub) {
			if nesting == 0 {
				return d.Errf("%s given twice", sub) // Caddy's error names the directive
			}
			return d.Errf("%s: %s given twice", name, sub)
		}
		seen[sub] = true
		if err := parse(d); err != nil {
			return err
		}
	}
	return nil
}

// oneArg reads the single argument of the subdirective d is on.
func oneArg(d *caddyfile.Dispenser) (string, error) {
	args := d.RemainingArgs()
	if len(args) != 1 {
		return "", d.ArgErr()
	}
	return args[0], nil
}

// stringArg parses a subdirective's one argument into *p.
func stringArg(p *string) subdirective {
	return func(d *caddyfile.Dispenser) (err error) {
		*p, err = oneArg(d)
		return err
	}
}

// listArg parses a subdirective's arguments, one at least, into *p.
func listArg(p *[]string) subdirective {
	return func(d *caddyfile.Dispenser) error {
		if *p = d.RemainingArgs(); len(*p) == 0 {
			return d.ArgErr()
		}
		return nil
	}
}

// intArg parses a subdirective's one argument, a positive whole number,
// into *p.
func intArg(p *int) subdirective {
	return func(d *caddyfile.Dispenser) error {
		sub := d.Val()
		v, err := oneArg(d)
		if err != nil {
			return err
		}
		if *p, err = strconv.Atoi(v); err != nil || *p <= 0 {
			return d.Errf("%s: want a positive whole number, got %q", sub, v)
		}
		return nil
	}
}

// durationArg parses a subdirective's one argument, a positive duration,
// into *p.
func durationArg(p *caddy.Duration) subdirective {
	return func(d *caddyfile.Dispenser) error {
		sub := d.Val()
		v, err := oneArg(d)
		if err == nil {
			*p, err = positiveDuration(d, sub, v)
		}
		return err
	}
}

// positiveDuration parses v, an argument of sub, as a positive duration.
func positiveDuration(d *caddyfile.Dispenser, sub, v string) (caddy.Duration, error) {
	dur, err := caddy.ParseDuration(v)
	if err != nil || dur <= 0 {
		return 0, d.Errf("%s: want a positive duration, got %q", sub, v)
	}
	return caddy.Duration(dur), nil
}

// sizeArg parses a subdirective's one argument, a byte size such as 1MiB,
// 64KiB or 1048576, into *p.
func sizeArg(p *int64) subdirective {
	return func(d *caddyfile.Dispenser) error {
		sub := d.Val()
		v, err := oneArg(d)
		if err != nil {
			return err
		}
		n, err := humanize.ParseBytes(v)
		if err == nil && (n == 0 || n > 1<<40) {
			err = errors.New("size must be between 1 byte and 1TiB")
		}
		if err != nil {
			return d.Errf("%s: %v", sub, err)
		}
		*p = int64(n)
		return nil
	}
}

// waitOr parses "wait <duration>", or the single word alt (e.g. reject),
// into *mode and *wait.
func waitOr(alt string, mode *string, wait *caddy.Duration) subdirective {
	return func(d *caddyfile.Dispenser) (err error) {
		sub := d.Val()
		switch args := d.RemainingArgs(); {
		case len(args) == 1 && args[0] == alt:
			*mode = alt
		case len(args) == 2 && args[0] == "wait":
			*mode = "wait"
			*wait, err = positiveDuration(d, sub+" wait", args[1])
		default:
			err = d.Errf("%s: want wait <duration>, or %s", sub, alt)
		}
		return err
	}
}

// waitFor is how long a mode that waitOr parses waits: 0 unless it is
// wait, whose duration defaults to 5s (set in *wait).
func waitFor(mode string, wait *caddy.Duration) time.Duration {
	if mode != "wait" {
		return 0
	}
	if *wait == 0 {
		*wait = caddy.Duration(5 * time.Second)
	}
	return time.Duration(*wait)
}

// Interface guards
var (
	_ caddyfile.Unmarshaler = (*App)(nil)
)

// resolveSecret replaces the {env.*} and {file.*} placeholders of a
// secret, trimmed. Caddy's error quotes the text in braces it does not
// know, which in a literal secret is part of the secret: that error is
// passed on only for a secret that is one {env.*} or {file.*} placeholder
// and nothing else.
func resolveSecret(repl *caddy.Replacer, what, secret string) (string, error) {
	val, err := repl.ReplaceOrErr(secret, true, true)
	switch {
	case err == nil:
		return strings.TrimSpace(val), nil
	case (strings.HasPrefix(secret, "{env.") || strings.HasPrefix(secret, "{file.")) && strings.HasSuffix(secret, "}") && strings.Count(secret, "{") == 1:
		return "", fmt.Errorf("%s: %w", what, err)
	}
	return "", fmt.Errorf("%s: it holds text in braces that is not a placeholder hookgate resolves ({env.NAME}, {file.PATH}); the text is not shown, as it may be the secret", what)
}
