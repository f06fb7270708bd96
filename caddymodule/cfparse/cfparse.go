// Package cfparse parses Caddyfile blocks the one way every hookgate
// directive does: a directive's one argument, then its block, each
// subdirective by name (a typo named with its nearest neighbour, one given
// twice refused), with the parsers of the common argument kinds.
package cfparse

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/dustin/go-humanize"

	"github.com/hookgate/hookgate/internal/suggest"
)

// Directive parses a directive (or a global option), d before its
// name: the one argument its line may have, into *arg (nil: it takes
// none), then its block.
func Directive(d *caddyfile.Dispenser, arg *string, name string, subs Block, repeats ...string) error {
	d.Next() // consume the directive's name
	if arg != nil && d.NextArg() {
		*arg = d.Val()
	}
	if d.NextArg() {
		return d.ArgErr()
	}
	return ParseBlock(d, name, subs, repeats...)
}

// A Sub parses a subdirective: one line of a block, d on its name. It
// reads the line's arguments, and its own block if it has one.
type Sub func(d *caddyfile.Dispenser) error

// Block lists the subdirectives of a Caddyfile block, in the order of its
// syntax.
type Block []struct {
	Name  string
	Parse Sub
}

// ParseBlock parses the block that opens on d's line, if one does: the
// Caddy idiom of for d.NextBlock and switch d.Val(), with subs for the
// switch. A subdirective not in subs is an error that names the block
// and the nearest subdirective, when it looks like a typo of one, else
// lists them all. One given twice is an error, unless repeats names it;
// the error names a nested block (Caddy's names the directive). A
// subdirective with a block of its own parses it with ParseBlock in turn.
func ParseBlock(d *caddyfile.Dispenser, name string, subs Block, repeats ...string) error {
	seen := map[string]bool{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		sub := d.Val()
		var parse Sub
		known := make([]string, 0, len(subs))
		for _, s := range subs {
			if s.Name == sub {
				parse = s.Parse
			}
			known = append(known, s.Name)
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

// OneArg reads the single argument of the subdirective d is on.
func OneArg(d *caddyfile.Dispenser) (string, error) {
	args := d.RemainingArgs()
	if len(args) != 1 {
		return "", d.ArgErr()
	}
	return args[0], nil
}

// String parses a subdirective's one argument into *p.
func String(p *string) Sub {
	return func(d *caddyfile.Dispenser) (err error) {
		*p, err = OneArg(d)
		return err
	}
}

// List parses a subdirective's arguments, one at least, into *p.
func List(p *[]string) Sub {
	return func(d *caddyfile.Dispenser) error {
		if *p = d.RemainingArgs(); len(*p) == 0 {
			return d.ArgErr()
		}
		return nil
	}
}

// Flag sets *p: a subdirective without arguments.
func Flag(p *bool) Sub {
	return func(d *caddyfile.Dispenser) error {
		*p = true
		if d.NextArg() {
			return d.ArgErr()
		}
		return nil
	}
}

// ErrAt is err, if any, at d's place in the Caddyfile.
func ErrAt(d *caddyfile.Dispenser, err error) error {
	if err != nil {
		return d.Err(err.Error())
	}
	return nil
}

// Int parses a subdirective's one argument, a positive whole number,
// into *p.
func Int(p *int) Sub {
	return func(d *caddyfile.Dispenser) error {
		sub := d.Val()
		v, err := OneArg(d)
		if err != nil {
			return err
		}
		if *p, err = strconv.Atoi(v); err != nil || *p <= 0 {
			return d.Errf("%s: want a positive whole number, got %q", sub, v)
		}
		return nil
	}
}

// Duration parses a subdirective's one argument, a positive duration,
// into *p.
func Duration(p *caddy.Duration) Sub {
	return func(d *caddyfile.Dispenser) error {
		sub := d.Val()
		v, err := OneArg(d)
		if err == nil {
			*p, err = PositiveDuration(d, sub, v)
		}
		return err
	}
}

// PositiveDuration parses v, an argument of sub, as a positive duration.
func PositiveDuration(d *caddyfile.Dispenser, sub, v string) (caddy.Duration, error) {
	dur, err := caddy.ParseDuration(v)
	if err != nil || dur <= 0 {
		return 0, d.Errf("%s: want a positive duration, got %q", sub, v)
	}
	return caddy.Duration(dur), nil
}

// Size parses a subdirective's one argument, a byte size such as 1MiB,
// 64KiB or 1048576, into *p.
func Size(p *int64) Sub {
	return func(d *caddyfile.Dispenser) error {
		sub := d.Val()
		v, err := OneArg(d)
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

// Name reads the name a repeated block takes (destination <name>,
// reconcile <name>): one argument, required.
func Name(d *caddyfile.Dispenser, what string) (string, error) {
	if !d.NextArg() {
		return "", d.Errf("%s needs a name", what)
	}
	name := d.Val()
	if d.NextArg() {
		return "", d.ArgErr()
	}
	return name, nil
}

// Range parses a subdirective's two arguments, positive durations, the
// second not under the first, into *lo and *hi (backoff <base> <cap>).
func Range(lo, hi *caddy.Duration, example string) Sub {
	return func(d *caddyfile.Dispenser) (err error) {
		sub, args := d.Val(), d.RemainingArgs()
		if len(args) != 2 {
			return d.Errf("%s: want two durations, e.g. %s %s", sub, sub, example)
		}
		if *lo, err = PositiveDuration(d, sub, args[0]); err != nil {
			return err
		}
		if *hi, err = PositiveDuration(d, sub, args[1]); err != nil {
			return err
		}
		if *hi < *lo {
			return d.Errf("%s: %s is under %s", sub, time.Duration(*hi), time.Duration(*lo))
		}
		return nil
	}
}

// Optional parses a subdirective's one argument, a duration of zero or
// more, into a new *p: nil when the subdirective is not given.
func Optional(p **caddy.Duration) Sub {
	return func(d *caddyfile.Dispenser) error {
		sub := d.Val()
		v, err := OneArg(d)
		if err != nil {
			return err
		}
		dur, err := caddy.ParseDuration(v)
		if err != nil || dur < 0 {
			return d.Errf("%s: want a duration of 0 or more, got %q", sub, v)
		}
		*p = (*caddy.Duration)(&dur)
		return nil
	}
}

// OneOrTwo parses a subdirective's one or two arguments, positive
// durations, into *first and *second; one alone sets both (tolerance
// <past> [<future>]).
func OneOrTwo(first, second *caddy.Duration) Sub {
	return func(d *caddyfile.Dispenser) error {
		sub, args := d.Val(), d.RemainingArgs()
		if len(args) < 1 || len(args) > 2 {
			return d.ArgErr()
		}
		var durs [2]time.Duration
		for i, a := range args {
			v, err := caddy.ParseDuration(a)
			switch {
			case err != nil:
				return d.Errf("%s: %v", sub, err)
			case v <= 0: // zero would silently mean the default in JSON: say so instead
				return d.Errf("%s must be positive: omit it for the default", sub)
			}
			durs[i] = v
		}
		if len(args) == 1 {
			durs[1] = durs[0]
		}
		*first, *second = caddy.Duration(durs[0]), caddy.Duration(durs[1])
		return nil
	}
}

// DurationOrOff parses a subdirective's one argument, a positive
// duration or off (stored as -1: never), into *p.
func DurationOrOff(p *caddy.Duration) Sub {
	return func(d *caddyfile.Dispenser) error {
		sub := d.Val()
		v, err := OneArg(d)
		switch {
		case err != nil:
			return err
		case v == "off":
			*p = -1
			return nil
		}
		*p, err = PositiveDuration(d, sub, v)
		return err
	}
}
