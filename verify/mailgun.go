package verify

// Mailgun signs inside the body, and signs little of it: hex HMAC-SHA256,
// under the account's HTTP webhook signing key, of the timestamp (unix
// seconds) and a random token, concatenated. The event data is not
// signed: only TLS protects it, and a captured delivery's event data
// could be changed under its signature. The token is signed, and is the
// delivery ID: dedupe keyed by it stops a replay, changed or not.
// Two shapes carry the three fields: a JSON body's "signature" object
// (current webhooks), or a form's top-level fields (legacy webhooks,
// urlencoded or multipart). Each field must be there once: a second,
// unsigned value could be the one the service behind reads.
// https://documentation.mailgun.com/docs/mailgun/user-manual/webhooks/securing-webhooks

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

type mailgunScheme struct{}

// Bounds on what a Mailgun body may hold: a token (Mailgun's are 50
// characters), a timestamp, a form's parts (its attachments among them).
const (
	mailgunMaxToken = 256
	mailgunMaxTS    = 20
	mailgunMaxParts = 1000
)

// mailgunFields are the body's signature fields, in the order they are
// signed, then the signature.
var mailgunFields = []string{"timestamp", "token", "signature"}

func (mailgunScheme) name() string                       { return "mailgun" }
func (mailgunScheme) defaultFuture() time.Duration       { return DefaultTolerance }
func (mailgunScheme) key(secret string) ([]byte, error)  { return []byte(secret), nil }
func (mailgunScheme) header(http.Header, parsed, []byte) {}

// mac writes the signed content: the timestamp as written, then the
// token. The body is not signed.
func (mailgunScheme) mac(h hash.Hash, p parsed, _ []byte) {
	_, _ = io.WriteString(h, p.rawTS)
	_, _ = io.WriteString(h, p.id)
}

// parse reads the signature fields from the body, in the shape its
// Content-Type names.
func (mailgunScheme) parse(r Request) (parsed, error) {
	f, err := mailgunRead(r.Header, r.Body)
	if err != nil {
		return parsed{}, err
	}
	ts, tok, sig := f["timestamp"], f["token"], f["signature"]
	if len(ts) > mailgunMaxTS || !canonicalDecimal(ts) {
		return parsed{}, fmt.Errorf("%w: the timestamp is not a unix timestamp in canonical decimal", ErrMalformedBody)
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return parsed{}, fmt.Errorf("%w: the timestamp is not a unix timestamp in canonical decimal", ErrMalformedBody)
	}
	if tok == "" || len(tok) > mailgunMaxToken {
		return parsed{}, fmt.Errorf("%w: the token is empty or over %d bytes", ErrMalformedBody, mailgunMaxToken)
	}
	raw, err := hex.DecodeString(sig)
	if err != nil || len(raw) != sha256.Size {
		return parsed{}, fmt.Errorf("%w: the signature is not a hex HMAC-SHA256", ErrMalformedBody)
	}
	return parsed{id: tok, ts: unix, hasTS: true, rawTS: ts, sigs: [][]byte{raw}}, nil
}

// mailgunRead reads the three signature fields of body, each once.
func mailgunRead(h http.Header, body []byte) (map[string]string, error) {
	ct, err := single(h, "Content-Type")
	if err != nil {
		return nil, err
	}
	media, params, err := mime.ParseMediaType(ct)
	if err != nil {
		media = ""
	}
	var f map[string]string
	switch media {
	case "application/json":
		f, err = mailgunJSON(body)
	case "application/x-www-form-urlencoded":
		f, err = mailgunURLForm(body)
	case "multipart/form-data":
		f, err = mailgunMultipart(body, params["boundary"])
	default:
		return nil, fmt.Errorf("%w: Content-Type %q is not JSON or a form", ErrMalformedBody, ct)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformedBody, err)
	}
	for _, name := range mailgunFields {
		if _, ok := f[name]; !ok {
			return nil, fmt.Errorf("%w: the body has no %s", ErrMalformedBody, name)
		}
	}
	return f, nil
}

// mailgunJSON reads a JSON body's signature object: the body a JSON
// object, each of its keys and each of signature's once.
func mailgunJSON(body []byte) (map[string]string, error) {
	top, err := jsonMembers(body)
	if err != nil {
		return nil, err
	}
	if err := foldedTwice(top, "signature"); err != nil {
		return nil, err
	}
	raw, ok := top["signature"]
	if !ok {
		return nil, errors.New("the body has no signature object")
	}
	fields, err := jsonStrings(raw, mailgunFields)
	if err != nil {
		return nil, fmt.Errorf("signature: %v", err)
	}
	for _, name := range mailgunFields {
		if err := foldedTwice(fields, name); err != nil {
			return nil, fmt.Errorf("signature: %v", err)
		}
	}
	f := make(map[string]string, len(mailgunFields))
	for _, name := range mailgunFields {
		if v, ok := fields[name]; ok {
			f[name] = v
		}
	}
	return f, nil
}

// foldedTwice refuses a key of members that is name in another case:
// encoding/json, and decoders like it, match keys without regard to case,
// so a service behind could read that one, unsigned.
func foldedTwice[V any](members map[string]V, name string) error {
	for key := range members {
		if key != name && strings.EqualFold(key, name) {
			return fmt.Errorf("%s is given twice (as %q)", name, key)
		}
	}
	return nil
}

// mailgunURLForm reads an urlencoded form's fields.
func mailgunURLForm(body []byte) (map[string]string, error) {
	q, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, errors.New("not an urlencoded form")
	}
	f := make(map[string]string, len(mailgunFields))
	for _, name := range mailgunFields {
		switch vs := q[name]; len(vs) {
		case 0:
		case 1:
			f[name] = vs[0]
		default:
			return nil, fmt.Errorf("%s is given twice", name)
		}
	}
	return f, nil
}

// mailgunMultipart reads a multipart form's fields, at most
// mailgunMaxParts parts, each signature field short.
func mailgunMultipart(body []byte, boundary string) (map[string]string, error) {
	if boundary == "" {
		return nil, errors.New("the multipart form has no boundary")
	}
	mr := multipart.NewReader(bytes.NewReader(body), boundary)
	f := make(map[string]string, len(mailgunFields))
	for n := 0; ; n++ {
		part, err := mr.NextPart()
		if err == io.EOF {
			return f, nil
		}
		if err != nil {
			return nil, errors.New("not a multipart form")
		}
		if n == mailgunMaxParts {
			return nil, fmt.Errorf("the form has over %d parts", mailgunMaxParts)
		}
		name := part.FormName()
		if !slices.Contains(mailgunFields, name) {
			continue
		}
		if _, ok := f[name]; ok {
			return nil, fmt.Errorf("%s is given twice", name)
		}
		v, err := io.ReadAll(io.LimitReader(part, mailgunMaxToken+1))
		if err != nil {
			return nil, errors.New("not a multipart form")
		}
		if len(v) > mailgunMaxToken {
			return nil, fmt.Errorf("%s is over %d bytes", name, mailgunMaxToken)
		}
		f[name] = string(v)
	}
}

// signMailgun writes r's body signed as Mailgun signs it: a JSON object
// (Mailgun's holds event-data) gets its signature object; an urlencoded form (by r's
// Content-Type) its three fields. The token is id.
func (v *Verifier) signMailgun(r Request, id string, ts time.Time) (http.Header, []byte, error) {
	stamp := strconv.FormatInt(ts.Unix(), 10)
	m := hmac.New(sha256.New, v.keys[0])
	_, _ = io.WriteString(m, stamp+id)
	sig := hex.EncodeToString(m.Sum(nil))
	media, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if media == "application/x-www-form-urlencoded" {
		q, err := url.ParseQuery(string(r.Body))
		if err != nil {
			return nil, nil, errors.New("mailgun signs an urlencoded form: the body does not parse as one")
		}
		q.Set("timestamp", stamp)
		q.Set("token", id)
		q.Set("signature", sig)
		return http.Header{"Content-Type": {media}}, []byte(q.Encode()), nil
	}
	top, err := jsonMembers(r.Body)
	if err != nil {
		return nil, nil, errors.New("mailgun signs a JSON object (its event-data), or an urlencoded form (Content-Type application/x-www-form-urlencoded)")
	}
	top["signature"], _ = json.Marshal(map[string]string{"timestamp": stamp, "token": id, "signature": sig})
	out, _ := json.Marshal(top)
	return http.Header{"Content-Type": {"application/json"}}, out, nil
}
