package destinations

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"time"

	"github.com/hookgate/hookgate/sender"
)

// Spec is a destination as the API takes it to create one.
type Spec struct {
	// Tenant owns it: its name is then <tenant>/<name>, unique within
	// the tenant, and only the tenant's events reach it.
	Tenant string `json:"tenant,omitempty"`
	Name   string `json:"name"`
	URL    string `json:"url"`
	// Scheme signs its requests: one of webhook_verify's schemes that
	// sign with a shared secret. Default standard.
	Scheme string `json:"scheme,omitempty"`
	// Secret signs; none: a new one is made (whsec_ and 32 random bytes,
	// base64) and answered once.
	Secret  string   `json:"secret,omitempty"`
	Events  []string `json:"events,omitempty"`
	Workers int      `json:"workers,omitempty"`
	Rate    float64  `json:"rate,omitempty"`
	// Headers are sent with every request; a value is never answered
	// when its name says secret, token, key, password or authorization.
	Headers     map[string]string `json:"headers,omitempty"`
	Description string            `json:"description,omitempty"`
	Metadata    map[string]string `json:"metadata,omitempty"`
}

// Patch changes what it sets of a destination; the rest stays. The name,
// scheme and secret are not patched: the secret is rotated (Rotate).
type Patch struct {
	URL         *string            `json:"url,omitempty"`
	Events      *[]string          `json:"events,omitempty"`
	Workers     *int               `json:"workers,omitempty"`
	Rate        *float64           `json:"rate,omitempty"`
	Headers     *map[string]string `json:"headers,omitempty"`
	Description *string            `json:"description,omitempty"`
	Metadata    *map[string]string `json:"metadata,omitempty"`
}

// View is a destination as the API answers it. Secret is set only in the
// answers to a create and a rotate; a header's value whose name says
// secret is never shown (sender.Redacted).
type View struct {
	// Name is its full name: <tenant>/<name> for a tenant's.
	Name        string            `json:"name"`
	Tenant      string            `json:"tenant,omitempty"`
	URL         string            `json:"url"`
	Scheme      string            `json:"scheme"`
	Events      []string          `json:"events"`
	Workers     int               `json:"workers,omitempty"`
	Rate        float64           `json:"rate,omitempty"`
	Headers     map[string]string `json:"headers,omitempty"`
	Description string            `json:"description,omitempty"`
	Metadata    map[string]string `json:"metadata,omitempty"`
	CreatedAt   time.Time         `json:"created_at"`
	UpdatedAt   time.Time         `json:"updated_at"`
	// Version names this version of it (of its stored record): an
	// instance delivers with it once its status's version says so.
	Version string `json:"version"`
	// PreviousExpiresAt is when a rotation's previous secret stops
	// signing; absent when none signs.
	PreviousExpiresAt *time.Time `json:"previous_expires_at,omitempty"`
	Secret            string     `json:"secret,omitempty"`
}

// record is what the backend keeps, as JSON: the secrets and the header
// values (which may hold credentials) sealed (seal.go).
type record struct {
	Name          string            `json:"name"`
	URL           string            `json:"url"`
	Scheme        string            `json:"scheme"`
	Secret        string            `json:"secret"`
	Previous      string            `json:"previous,omitempty"`
	PreviousUntil time.Time         `json:"previous_until,omitzero"`
	Events        []string          `json:"events,omitempty"`
	Workers       int               `json:"workers,omitempty"`
	Rate          float64           `json:"rate,omitempty"`
	Headers       string            `json:"headers,omitempty"`
	Description   string            `json:"description,omitempty"`
	Metadata      map[string]string `json:"metadata,omitempty"`
	Created       time.Time         `json:"created_at"`
	Updated       time.Time         `json:"updated_at"`
	// Rev counts the record's changes: the sender's Destination.Rev.
	Rev uint64 `json:"rev"`
}

// opened is a record with its secrets opened.
type opened struct {
	record
	secret, previous string
	headers          map[string]string
}

// Bounds of what a record holds, so that a caller cannot store
// unbounded data in every instance's memory.
const (
	maxDescription = 1024
	maxMetadata    = 32 // entries
	maxMetaLen     = 256
	maxEvents      = 64
	maxHeaders     = 32
	maxRate        = 100000 // attempts a second
	minSecret      = 16     // bytes of a caller's secret
)

// nameRE is an API destination's name: it goes in paths, metric labels
// and Redis keys as it is.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// InvalidError is a destination the API refuses as given: 400.
type InvalidError struct{ Err error }

func (e InvalidError) Error() string { return e.Err.Error() }
func (e InvalidError) Unwrap() error { return e.Err }

func invalid(format string, args ...any) error {
	return InvalidError{fmt.Errorf(format, args...)}
}

// checkFields refuses what is not bounded or not well formed in o, the
// destination as it would be stored; build checks the rest.
func (o *opened) checkFields() error {
	tenant, name := sender.TenantOf(o.Name), o.Name
	if tenant != "" {
		name = o.Name[len(tenant)+1:]
		if err := sender.CheckTenant(tenant); err != nil {
			return InvalidError{err}
		}
	}
	switch {
	case o.Name != sender.Qualify(tenant, name) || !nameRE.MatchString(name):
		return invalid("name %q: want 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit (a tenant goes in tenant)", name)
	case len(o.Description) > maxDescription:
		return invalid("description: at most %d bytes", maxDescription)
	case len(o.Metadata) > maxMetadata:
		return invalid("metadata: at most %d entries", maxMetadata)
	case len(o.Events) > maxEvents:
		return invalid("events: at most %d globs", maxEvents)
	case len(o.headers) > maxHeaders:
		return invalid("headers: at most %d", maxHeaders)
	case o.Workers < 0 || o.Rate < 0:
		return invalid("workers and rate must not be negative")
	}
	for k, v := range o.Metadata {
		if len(k) > maxMetaLen || len(v) > maxMetaLen {
			return invalid("metadata: keys and values of at most %d bytes", maxMetaLen)
		}
	}
	for k, v := range o.headers {
		if v == sender.Redacted {
			return invalid("header %s: %q is how answers hide a value: send the value itself", k, sender.Redacted)
		}
	}
	switch u, err := url.Parse(o.URL); {
	case err == nil && u.User != nil:
		return invalid("url: no user or password in the URL: send credentials in a header (headers)")
	case o.Rate > maxRate:
		return invalid("rate: at most %d a second", maxRate)
	case len(o.secret) < minSecret:
		return invalid("secret: at least %d bytes (or none: a new one is made)", minSecret)
	}
	return nil
}

// versionOf names a stored record's version: its digest's first 8
// bytes, hex. A record made again under its name (a new sealed secret,
// a new nonce) is another version, whatever its rev.
func versionOf(sum [32]byte) string { return hex.EncodeToString(sum[:8]) }

// build is the sender's destination of o: guarded, signed, its headers
// checked. Its Rev is the version Sync gives it.
func (o *opened) build() (sender.Destination, error) {
	h := make(http.Header, len(o.headers))
	for k, v := range o.headers {
		h.Set(k, v)
	}
	tenant, name := sender.TenantOf(o.Name), o.Name
	if tenant != "" {
		name = o.Name[len(tenant)+1:]
	}
	return Config{Tenant: tenant, Name: name, URL: o.URL, Scheme: o.Scheme, Secret: o.secret, Previous: o.previous, PreviousUntil: o.PreviousUntil,
		Events: o.Events, Workers: o.Workers, Rate: o.Rate, Header: h, Guard: true}.Build()
}

// view is o as the API answers it, without its secret.
func (o *opened) view(now time.Time) View {
	v := View{Name: o.Name, Tenant: sender.TenantOf(o.Name), URL: o.URL, Scheme: o.Scheme, Events: o.Events, Workers: o.Workers, Rate: o.Rate,
		Description: o.Description, Metadata: o.Metadata, CreatedAt: o.Created, UpdatedAt: o.Updated}
	if v.Events == nil {
		v.Events = []string{}
	}
	if o.previous != "" && o.PreviousUntil.After(now) {
		until := o.PreviousUntil
		v.PreviousExpiresAt = &until
	}
	for k, val := range o.headers {
		if v.Headers == nil {
			v.Headers = map[string]string{}
		}
		if sender.SecretHeader(k) {
			val = sender.Redacted
		}
		v.Headers[k] = val
	}
	return v
}

// marshal seals o's secrets into its record, as JSON.
func (o *opened) marshal(s sealer) ([]byte, error) {
	r := o.record
	r.Secret = s.seal(o.Name, "secret", o.secret)
	r.Previous = ""
	if o.previous != "" {
		r.Previous = s.seal(o.Name, "previous", o.previous)
	}
	r.Headers = ""
	if len(o.headers) > 0 {
		h, err := json.Marshal(o.headers)
		if err != nil {
			return nil, err
		}
		r.Headers = s.seal(o.Name, "headers", string(h))
	}
	return json.Marshal(r)
}

// unmarshal opens a stored record.
func unmarshal(s sealer, raw []byte) (*opened, error) {
	o := new(opened)
	if err := json.Unmarshal(raw, &o.record); err != nil {
		return nil, fmt.Errorf("a stored destination does not parse: %w", err)
	}
	var err error
	if o.secret, err = s.open(o.Name, "secret", o.Secret); err != nil {
		return nil, err
	}
	if o.Previous != "" {
		if o.previous, err = s.open(o.Name, "previous", o.Previous); err != nil {
			return nil, err
		}
	}
	if o.Headers != "" {
		h, err := s.open(o.Name, "headers", o.Headers)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(h), &o.headers); err != nil {
			return nil, errors.New("a stored destination's headers do not parse")
		}
	}
	return o, nil
}

// newSecret is a new signing secret: whsec_ and the base64 of 32 random
// bytes, as Standard Webhooks and Svix make them.
func newSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}
