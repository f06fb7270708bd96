package caddymodule

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/hookgate/hookgate/caddymodule/cfparse"
	"github.com/hookgate/hookgate/internal/replicas"
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
//			min_replicas <n> [<timeout>]
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
// hookgate blocks merge; a cfparse.Sub or a name given twice is an error.
func (a *App) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	// What an earlier hookgate block set counts as given.
	once := func(given bool, parse cfparse.Sub) cfparse.Sub {
		if given {
			return func(d *caddyfile.Dispenser) error { return d.Errf("%s given twice", d.Val()) }
		}
		return parse
	}
	return cfparse.Directive(d, nil, "hookgate", cfparse.Block{
		{"store", once(a.Store != nil, func(d *caddyfile.Dispenser) error {
			a.Store = new(StoreConfig)
			return a.Store.unmarshalCaddyfile(d)
		})},
		{"key_prefix", once(a.KeyPrefix != "", cfparse.String(&a.KeyPrefix))},
		{"allow_networks", once(a.AllowNetworks != nil, cfparse.List(&a.AllowNetworks))},
		{"secrets_key", once(a.SecretsKey != "", cfparse.String(&a.SecretsKey))},
		{"portal_key", once(a.PortalKey != "", cfparse.String(&a.PortalKey))},
		{"portal_url", once(a.PortalURL != "", cfparse.String(&a.PortalURL))},
		{"sender", once(a.Sender != nil, func(d *caddyfile.Dispenser) error {
			if d.NextArg() {
				return d.ArgErr()
			}
			a.Sender = new(SenderConfig)
			return a.Sender.unmarshalCaddyfile(d)
		})},
		{"reconcile", func(d *caddyfile.Dispenser) error {
			name, err := cfparse.Name(d, "reconcile")
			if err != nil {
				return err
			}
			job := &ReconcileJob{Name: name}
			if slices.ContainsFunc(a.Reconcile, func(o *ReconcileJob) bool { return o.Name == job.Name }) {
				return d.Errf("reconcile %q given twice", job.Name)
			}
			a.Reconcile = append(a.Reconcile, job)
			return job.unmarshalCaddyfile(d)
		}},
		{"destination", func(d *caddyfile.Dispenser) error {
			name, err := cfparse.Name(d, "destination")
			if err != nil {
				return err
			}
			dc := &DestinationConfig{Name: name}
			if err := dc.unmarshalCaddyfile(d); err != nil {
				return err
			}
			if slices.ContainsFunc(a.Destinations, func(o *DestinationConfig) bool { return o.Name == dc.Name && o.Tenant == dc.Tenant }) {
				return d.Errf("destination %q given twice", sender.Qualify(dc.Tenant, dc.Name))
			}
			a.Destinations = append(a.Destinations, dc)
			return nil
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
	return cfparse.ParseBlock(d, "store", cfparse.Block{
		{"sentinel_master", func(d *caddyfile.Dispenser) error {
			if sc.Backend != "redis" {
				return d.ArgErr()
			}
			return cfparse.String(&sc.SentinelMaster)(d)
		}},
		{"min_replicas", func(d *caddyfile.Dispenser) error {
			if sc.Backend != "redis" {
				return d.Err("min_replicas is a Redis store's: the embedded store has no replicas")
			}
			args := d.RemainingArgs()
			if len(args) < 1 || len(args) > 2 {
				return d.Err("min_replicas takes a number of replicas and, optionally, a timeout: min_replicas <n> [<timeout>]")
			}
			n, err := strconv.Atoi(args[0])
			if err != nil || n < 0 {
				return d.Errf("min_replicas: want a number of replicas, 0 or more, got %q", args[0])
			}
			sc.MinReplicas = n
			if len(args) == 2 {
				if sc.ReplicaTimeout, err = cfparse.PositiveDuration(d, "min_replicas", args[1]); err != nil {
					return err
				}
				if time.Duration(sc.ReplicaTimeout) > replicas.MaxTimeout {
					return d.Errf("min_replicas: a timeout of at most %s, got %q: a Redis call waits 2s for its answer, WAIT's included", replicas.MaxTimeout, args[1])
				}
			}
			return nil
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
//		disable_after <duration>|off
//		failing_after <duration>|off
//		operational   <destination>
//		breaker {
//			failures  <n>
//			open      <duration>
//			half_open <n>
//		}
//	}
func (sc *SenderConfig) unmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return cfparse.ParseBlock(d, "sender", cfparse.Block{
		{"workers", cfparse.Int(&sc.Workers)},
		{"attempts", cfparse.Int(&sc.Attempts)},
		{"backoff", cfparse.Range(&sc.Backoff, &sc.BackoffCap, "2s 15m")}, // <base> <cap>
		{"timeout", cfparse.Duration(&sc.Timeout)},
		{"lease", cfparse.Duration(&sc.Lease)},
		{"retention", cfparse.Duration(&sc.Retention)},
		{"max_redrive", cfparse.Int(&sc.MaxRedrive)},
		{"history", cfparse.Duration(&sc.History)},
		{"history_payload", cfparse.Optional(&sc.HistoryPayload)}, // 0 keeps no payload
		{"disable_after", cfparse.DurationOrOff(&sc.DisableAfter)},
		{"failing_after", cfparse.DurationOrOff(&sc.FailingAfter)},
		{"operational", cfparse.String(&sc.Operational)},
		{"breaker", func(d *caddyfile.Dispenser) error {
			if d.NextArg() {
				return d.ArgErr()
			}
			b := new(BreakerConfig)
			sc.Breaker = b
			return cfparse.ParseBlock(d, "breaker", cfparse.Block{
				{"failures", cfparse.Int(&b.Failures)},
				{"open", cfparse.Duration(&b.Open)},
				{"half_open", cfparse.Int(&b.HalfOpen)},
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
//		ordering none|entity
//		on_dead  skip|hold
//		guard    on|off    # the SSRF guard (default off for a static destination)
//		previous_secret <secret> <until RFC 3339>  # a rotation's old secret, signing too until then
//		header   <name> <value>  # sent with every request; repeatable
//	}
func (dc *DestinationConfig) unmarshalCaddyfile(d *caddyfile.Dispenser) error {
	err := cfparse.ParseBlock(d, "destination", cfparse.Block{
		{"tenant", cfparse.String(&dc.Tenant)},
		{"url", cfparse.String(&dc.URL)},
		{"scheme", cfparse.String(&dc.Scheme)},
		{"secret", cfparse.String(&dc.Secret)},
		{"key_id", cfparse.String(&dc.KeyID)},
		{"workers", cfparse.Int(&dc.Workers)},
		{"rate", func(d *caddyfile.Dispenser) error {
			v, err := cfparse.OneArg(d)
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
		{"ordering", cfparse.String(&dc.Ordering)},
		{"on_dead", cfparse.String(&dc.OnDead)},
		{"guard", cfparse.String(&dc.Guard)},
		{"header", func(d *caddyfile.Dispenser) error {
			args := d.RemainingArgs()
			if len(args) != 2 {
				return d.Errf("destination %s: want header <name> <value>", dc.Name)
			}
			if dc.Headers == nil {
				dc.Headers = http.Header{}
			}
			dc.Headers.Add(args[0], args[1])
			return nil
		}},
		{"previous_secret", func(d *caddyfile.Dispenser) error {
			if args := d.RemainingArgs(); len(args) == 2 {
				dc.PreviousSecret, dc.PreviousUntil = args[0], args[1]
				return nil
			}
			return d.Errf("destination %s: want previous_secret <secret> <until, RFC 3339>", dc.Name)
		}},
	}, "header")
	switch {
	case err != nil:
		return err
	case dc.URL == "":
		return d.Errf("destination %s needs a url", dc.Name)
	case dc.Secret == "":
		return d.Errf("destination %s needs a secret", dc.Name)
	}
	if _, err := sender.ParseOrdering(dc.Ordering, dc.OnDead); err != nil {
		return d.Errf("destination %s: %v", dc.Name, err)
	}
	if dc.Guard != "" && dc.Guard != "on" && dc.Guard != "off" {
		return d.Errf("destination %s: guard %q: want on or off", dc.Name, dc.Guard)
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

// waitOr parses "wait <duration>", or the single word alt (e.g. reject),
// into *mode and *wait.
func waitOr(alt string, mode *string, wait *caddy.Duration) cfparse.Sub {
	return func(d *caddyfile.Dispenser) (err error) {
		sub := d.Val()
		switch args := d.RemainingArgs(); {
		case len(args) == 1 && args[0] == alt:
			*mode = alt
		case len(args) == 2 && args[0] == "wait":
			*mode = "wait"
			*wait, err = cfparse.PositiveDuration(d, sub+" wait", args[1])
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
