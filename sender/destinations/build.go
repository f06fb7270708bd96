package destinations

import (
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"golang.org/x/time/rate"

	"github.com/hookgate/hookgate/sender"
	"github.com/hookgate/hookgate/verify"
)

// Config is one destination's settings with every value read (no
// placeholder left): the one way a destination is built, the
// Caddyfile's (static) and the API's alike.
type Config struct {
	// Tenant, when set, owns it: its name is then <Tenant>/<Name>, and
	// Name holds no slash.
	Tenant    string
	Name, URL string
	// Scheme and Secret sign ("" is standard); KeyID names the key where
	// the scheme needs it (rfc9421, sns, pubsub).
	Scheme, Secret, KeyID string
	// Previous signs beside Secret until PreviousUntil: a rotation's old
	// secret, in the schemes that carry several signatures.
	Previous      string
	PreviousUntil time.Time
	Events        []string
	Workers       int
	Rate          float64
	Header        http.Header
	Ordering      sender.Ordering
	Guard         bool
	Rev           string
}

// Build is the sender's destination of c: its URL, name and events
// checked, its signers made, its headers checked against the scheme's.
// An error names no secret and no header value.
func (c Config) Build() (sender.Destination, error) {
	if strings.Contains(c.Name, "/") {
		return sender.Destination{}, invalid("destination %q: a name holds no slash: a tenant's destination is given its tenant (tenant <id>), "+
			"and is then named <tenant>/<name>", c.Name)
	}
	if c.Tenant != "" {
		if err := sender.CheckTenant(c.Tenant); err != nil {
			return sender.Destination{}, invalid("destination %q: %w", c.Name, err)
		}
		c.Name = sender.Qualify(c.Tenant, c.Name)
	}
	d := sender.Destination{Name: c.Name, URL: c.URL, Workers: c.Workers, Rate: rate.Limit(c.Rate), Burst: max(1, int(c.Rate)),
		Events: c.Events, Ordering: c.Ordering, Guard: c.Guard, Rev: c.Rev}
	if err := sender.CheckDestinations([]sender.Destination{d}); err != nil {
		return d, InvalidError{err}
	}
	signer, err := verify.NewSigner(c.Scheme, c.Secret, c.KeyID)
	if err != nil {
		return d, invalid("destination %q: %w", c.Name, err)
	}
	d.Signer = signer
	if c.Previous != "" {
		prev, err := verify.NewSigner(c.Scheme, c.Previous, c.KeyID)
		if err != nil {
			return d, invalid("destination %q: previous_secret: %w", c.Name, err)
		}
		d.Previous, d.PreviousUntil = prev, c.PreviousUntil
	}
	d.Header = make(http.Header, len(c.Header))
	for _, name := range slices.Sorted(maps.Keys(c.Header)) {
		for _, val := range c.Header[name] {
			if err := sender.CheckHeader(name, val, signer, c.URL); err != nil {
				return d, invalid("destination %q: %w", c.Name, err)
			}
			d.Header.Add(name, val)
		}
	}
	return d, nil
}
