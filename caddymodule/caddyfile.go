package caddymodule

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
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
// hookgate. destination and reconcile repeat, one block per name; the
// README's "The sender" and "Reconcile" give their blocks. Repeated
// hookgate blocks merge; a subdirective or a name given twice is an error.
func (a *App) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // consume option name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		switch d.Val() {
		case "store":
			if a.Store != nil {
				return d.Err("store given twice")
			}
			a.Store = new(StoreConfig)
			if !d.NextArg() {
				return d.ArgErr()
			}
			a.Store.Backend = d.Val()
			args := d.RemainingArgs()
			switch a.Store.Backend {
			case "file":
				if len(args) > 1 {
					return d.Errf("store file takes one directory, got %d", len(args))
				}
				if len(args) == 1 {
					a.Store.Dir = args[0]
				}
			case "redis":
				if len(args) == 0 {
					return d.Err("store redis needs at least one redis:// or rediss:// URL")
				}
				a.Store.URLs = args
			default:
				return d.Errf("unknown store backend %q (want file or redis)", a.Store.Backend)
			}
			for nesting := d.Nesting(); d.NextBlock(nesting); {
				switch d.Val() {
				case "sentinel_master":
					if a.Store.Backend != "redis" || !d.NextArg() {
						return d.ArgErr()
					}
					a.Store.SentinelMaster = d.Val()
					if d.NextArg() {
						return d.ArgErr()
					}
				default:
					return unknownSubdirective(d, "store", d.Val(), "sentinel_master")
				}
			}
		case "key_prefix":
			if a.KeyPrefix != "" {
				return d.Err("key_prefix given twice")
			}
			if !d.NextArg() {
				return d.ArgErr()
			}
			a.KeyPrefix = d.Val()
			if d.NextArg() {
				return d.ArgErr()
			}
		case "sender":
			if a.Sender != nil {
				return d.Err("sender given twice")
			}
			if d.NextArg() {
				return d.ArgErr()
			}
			a.Sender = new(SenderConfig)
			if err := a.Sender.unmarshalCaddyfile(d); err != nil {
				return err
			}
		case "reconcile":
			if !d.NextArg() {
				return d.Err("reconcile needs a job name")
			}
			job := &ReconcileJob{Name: d.Val()}
			if d.NextArg() {
				return d.ArgErr()
			}
			for _, other := range a.Reconcile {
				if other.Name == job.Name {
					return d.Errf("reconcile %q given twice", job.Name)
				}
			}
			if err := job.unmarshalCaddyfile(d); err != nil {
				return err
			}
			a.Reconcile = append(a.Reconcile, job)
		case "destination":
			if !d.NextArg() {
				return d.Err("destination needs a name")
			}
			dc := &DestinationConfig{Name: d.Val()}
			if d.NextArg() {
				return d.ArgErr()
			}
			for _, other := range a.Destinations {
				if other.Name == dc.Name {
					return d.Errf("destination %q given twice", dc.Name)
				}
			}
			if err := dc.unmarshalCaddyfile(d); err != nil {
				return err
			}
			a.Destinations = append(a.Destinations, dc)
		default:
			return unknownSubdirective(d, "hookgate", d.Val(), "store", "key_prefix", "sender", "reconcile", "destination")
		}
	}
	return nil
}

// unknownSubdirective is the error for sub, a subdirective of block that
// is none of known: it names the nearest of them, when sub looks like a
// typo of one, else lists them all.
func unknownSubdirective(d *caddyfile.Dispenser, block, sub string, known ...string) error {
	if near := suggest.Closest(sub, known); near != "" {
		return d.Errf("unknown %s subdirective %q; did you mean %q?", block, sub, near)
	}
	return d.Errf("unknown %s subdirective %q (want one of %s)", block, sub, strings.Join(known, ", "))
}

// positiveInt parses the one argument of sub as a positive integer.
func positiveInt(d *caddyfile.Dispenser, sub string, args []string) (int, error) {
	v, err := oneArg(d, args)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0, d.Errf("%s: want a positive integer, got %q", sub, v)
	}
	return n, nil
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
	seen := map[string]bool{}
	var err error
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		sub := d.Val()
		if seen[sub] {
			return d.Errf("sender: %s given twice", sub)
		}
		seen[sub] = true
		args := d.RemainingArgs()
		switch sub {
		case "workers":
			sc.Workers, err = positiveInt(d, sub, args)
		case "attempts":
			sc.Attempts, err = positiveInt(d, sub, args)
		case "backoff":
			if len(args) != 2 {
				return d.Errf("backoff: want <base> <cap>, e.g. backoff 2s 15m")
			}
			if sc.Backoff, err = positiveDuration(d, sub, args[:1]); err == nil {
				sc.BackoffCap, err = positiveDuration(d, sub, args[1:])
			}
			if err == nil && sc.BackoffCap < sc.Backoff {
				return d.Errf("backoff: the cap %s is under the base %s", time.Duration(sc.BackoffCap), time.Duration(sc.Backoff))
			}
		case "timeout":
			sc.Timeout, err = positiveDuration(d, sub, args)
		case "lease":
			sc.Lease, err = positiveDuration(d, sub, args)
		case "retention":
			sc.Retention, err = positiveDuration(d, sub, args)
		case "max_redrive":
			sc.MaxRedrive, err = positiveInt(d, sub, args)
		case "history":
			sc.History, err = positiveDuration(d, sub, args)
		case "history_payload":
			var v caddy.Duration
			if v, err = positiveDuration(d, sub, args); err != nil && len(args) == 1 {
				if z, zerr := caddy.ParseDuration(args[0]); zerr == nil && z == 0 {
					v, err = 0, nil // keeps no payload
				}
			}
			sc.HistoryPayload = &v
		case "breaker":
			if len(args) != 0 {
				return d.ArgErr()
			}
			sc.Breaker = new(BreakerConfig)
			for nesting := d.Nesting(); d.NextBlock(nesting); {
				sub := d.Val()
				args := d.RemainingArgs()
				switch sub {
				case "failures":
					sc.Breaker.Failures, err = positiveInt(d, sub, args)
				case "open":
					sc.Breaker.Open, err = positiveDuration(d, sub, args)
				case "half_open":
					sc.Breaker.HalfOpen, err = positiveInt(d, sub, args)
				default:
					return unknownSubdirective(d, "breaker", sub, "failures", "open", "half_open")
				}
				if err != nil {
					return err
				}
			}
		default:
			return unknownSubdirective(d, "sender", sub, "workers", "attempts", "backoff", "timeout", "lease", "retention", "max_redrive", "history", "history_payload", "breaker")
		}
		if err != nil {
			return err
		}
	}
	return nil
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
	seen := map[string]bool{}
	var err error
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		sub := d.Val()
		if seen[sub] {
			return d.Errf("destination %s: %s given twice", dc.Name, sub)
		}
		seen[sub] = true
		args := d.RemainingArgs()
		switch sub {
		case "url":
			dc.URL, err = oneArg(d, args)
		case "scheme":
			dc.Scheme, err = oneArg(d, args)
		case "secret":
			dc.Secret, err = oneArg(d, args)
		case "key_id":
			dc.KeyID, err = oneArg(d, args)
		case "workers":
			dc.Workers, err = positiveInt(d, sub, args)
		case "rate":
			var v string
			if v, err = oneArg(d, args); err == nil {
				if dc.Rate, err = sender.ParseRate(v); err != nil {
					return d.Err(err.Error())
				}
			}
		case "events":
			if dc.Events = args; len(args) == 0 {
				return d.Errf("destination %s: events needs at least one event type glob, e.g. events reservation.* seat.released", dc.Name)
			}
		default:
			return unknownSubdirective(d, "destination", sub, "url", "scheme", "secret", "key_id", "workers", "rate", "events")
		}
		if err != nil {
			return err
		}
	}
	if dc.URL == "" {
		return d.Errf("destination %s needs a url", dc.Name)
	}
	if dc.Secret == "" {
		return d.Errf("destination %s needs a secret", dc.Name)
	}
	return nil
}

// positiveDuration parses the single, positive duration argument of sub.
func positiveDuration(d *caddyfile.Dispenser, sub string, args []string) (caddy.Duration, error) {
	v, err := oneArg(d, args)
	if err != nil {
		return 0, err
	}
	dur, err := caddy.ParseDuration(v)
	if err != nil || dur <= 0 {
		return 0, d.Errf("%s: want a positive duration, got %q", sub, v)
	}
	return caddy.Duration(dur), nil
}

// waitOr parses "wait <duration>" or the single word alt (e.g. reject).
func waitOr(d *caddyfile.Dispenser, sub, alt string, args []string) (string, caddy.Duration, error) {
	switch {
	case len(args) == 1 && args[0] == alt:
		return alt, 0, nil
	case len(args) == 2 && args[0] == "wait":
		wait, err := caddy.ParseDuration(args[1])
		if err != nil || wait <= 0 {
			return "", 0, d.Errf("%s wait: want a positive duration, got %q", sub, args[1])
		}
		return "wait", caddy.Duration(wait), nil
	}
	return "", 0, d.Errf("%s: want wait <duration>, or %s", sub, alt)
}

// oneArg returns the single argument of a subdirective.
func oneArg(d *caddyfile.Dispenser, args []string) (string, error) {
	if len(args) != 1 {
		return "", d.ArgErr()
	}
	return args[0], nil
}

// parseSize parses a byte size such as 1MiB, 64KiB or 1048576.
func parseSize(s string) (int64, error) {
	n, err := humanize.ParseBytes(s)
	if err != nil {
		return 0, err
	}
	if n == 0 || n > 1<<40 {
		return 0, errSizeRange
	}
	return int64(n), nil
}

var errSizeRange = errors.New("size must be between 1 byte and 1TiB")

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
