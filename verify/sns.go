package verify

// Amazon SNS's HTTP(S) subscriptions: the message is a JSON body that
// carries its own signature, RSA under the certificate its SigningCertURL
// names (SignatureVersion 1: SHA1withRSA; 2: SHA256withRSA) over SNS's
// canonical string of the message's fields. The trust is where the
// certificate comes from: an https URL on an SNS host, fetched (fetch.go)
// and cached for an hour. https://docs.aws.amazon.com/sns/latest/dg/sns-verify-signature-of-message.html

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	_ "crypto/sha1" // #nosec G505 -- SNS's SignatureVersion 1 is SHA1withRSA
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"hash"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// SNS configures scheme sns.
type SNS struct {
	// Topics are the topic ARNs whose messages are accepted. Required.
	Topics []string `json:"topics,omitempty"`
	// CertHosts are the hosts a SigningCertURL or a SubscribeURL may
	// name: host names, or globs whose * stands for one DNS label; a
	// host:port allows that port, else only 443. Default: SNS's own,
	// sns.<region>.amazonaws.com and sns.<region>.amazonaws.com.cn.
	CertHosts []string `json:"cert_hosts,omitempty"`
	// ConfirmSubscriptions has webhook_verify confirm a listed topic's
	// SubscriptionConfirmation itself, by a GET of its SubscribeURL;
	// otherwise the verified confirmation is passed on like a
	// notification.
	ConfirmSubscriptions bool `json:"confirm_subscriptions,omitempty"`

	// signingCertURL is the SigningCertURL a signer (NewSigner) writes.
	signingCertURL string
}

// Errors of scheme sns, beside the common ones.
var (
	// ErrTopicNotAllowed means the message's TopicArn is not among
	// Topics (403 topic_not_allowed).
	ErrTopicNotAllowed = errors.New("topic not allowed")
	// ErrCertURLNotAllowed means a SigningCertURL or SubscribeURL is not
	// https, on a CertHosts host (403 cert_url_not_allowed).
	ErrCertURLNotAllowed = errors.New("URL not allowed")
	// ErrNotConfirmed means a SubscriptionConfirmation's SubscribeURL
	// did not answer 200 (502 subscription_not_confirmed).
	ErrNotConfirmed = errors.New("subscription not confirmed")
)

// snsScheme names the scheme; its requests take their own path through
// Verify and SignMessage (Verifier.sns).
type snsScheme struct{}

func (snsScheme) name() string                 { return "sns" }
func (snsScheme) defaultFuture() time.Duration { return DefaultTolerance }
func (snsScheme) key(string) ([]byte, error) {
	return nil, errors.New("sns verifies with the certificate its messages name")
}
func (snsScheme) parse(Request) (parsed, error) {
	return parsed{}, errors.New("sns is verified by sns.verify")
}
func (snsScheme) mac(hash.Hash, parsed, []byte)      {}
func (snsScheme) header(http.Header, parsed, []byte) {}

// snsRegionHost is the default CertHosts: SNS's endpoint in a region
// (us-east-1, us-gov-west-1, cn-north-1, ...), not any amazonaws.com
// host (sns.s3.amazonaws.com would be an S3 bucket's).
var snsRegionHost = regexp.MustCompile(`^sns\.[a-z]{2}(-[a-z]+)+-[0-9]+\.amazonaws\.com(\.cn)?$`)

// snsCertPath is the path of SNS's certificates on its own hosts.
var snsCertPath = regexp.MustCompile(`^/SimpleNotificationService-[0-9a-f]{32}\.pem$`)

// snsCertTTL is how long a fetched certificate is used before it is
// fetched again: at most one fetch per URL an hour.
const snsCertTTL = time.Hour

// snsMaxField bounds the fields of a message SNS's string signs: SNS's
// own limit on a message is 256 KiB.
const snsMaxField = 256 << 10

// sns verifies scheme sns's messages.
type sns struct {
	cfg   SNS
	fetch *fetcher
	// signer signs (NewSigner): an RSA private key.
	signer *rsa.PrivateKey
}

// newSNS reads scheme sns's configuration; its secrets are optional: a
// PKCS#8 PEM RSA private key signs (hookgate sign, tests).
func newSNS(secrets []string, opts Options) (*sns, error) {
	if opts.SNS == nil || (len(opts.SNS.Topics) == 0 && opts.SNS.signingCertURL == "") {
		return nil, errors.New("scheme sns needs topics: the topic ARNs whose messages are accepted")
	}
	s := &sns{cfg: *opts.SNS, fetch: newFetcher(opts.Client)}
	for _, t := range s.cfg.Topics {
		if !strings.HasPrefix(t, "arn:") {
			return nil, fmt.Errorf("scheme sns: topic %q is not a topic ARN (arn:aws:sns:<region>:<account>:<name>)", t)
		}
	}
	for _, h := range s.cfg.CertHosts {
		if h == "" || strings.ContainsAny(h, "/@?# ") {
			return nil, fmt.Errorf("scheme sns: cert_hosts %q is not a host name, a host:port or a glob of one", h)
		}
	}
	var err error
	if s.signer, err = rsaSigner(secrets, "scheme sns verifies with the certificate each message names, without a secret"); err != nil {
		return nil, err
	}
	return s, nil
}

// snsMessage is an SNS message's fields.
type snsMessage struct {
	Type, MessageID, TopicArn, Message, Timestamp, Token, SubscribeURL string
	Subject                                                            *string
	SignatureVersion, Signature, SigningCertURL                        string
}

// canonical is the string SNS signs: the fields of the message's type,
// in name order, each "Name\nvalue\n"; Subject only when present.
func (m *snsMessage) canonical() []byte {
	var b bytes.Buffer
	field := func(name, value string) { b.WriteString(name + "\n" + value + "\n") }
	field("Message", m.Message)
	field("MessageId", m.MessageID)
	if m.Type == "Notification" {
		if m.Subject != nil {
			field("Subject", *m.Subject)
		}
	} else {
		field("SubscribeURL", m.SubscribeURL)
	}
	field("Timestamp", m.Timestamp)
	if m.Type != "Notification" {
		field("Token", m.Token)
	}
	field("TopicArn", m.TopicArn)
	field("Type", m.Type)
	return b.Bytes()
}

// snsHash is the digest of SignatureVersion v.
func snsHash(v string) (crypto.Hash, bool) {
	switch v {
	case "1":
		return crypto.SHA1, true
	case "2":
		return crypto.SHA256, true
	}
	return 0, false
}

// readSNS reads body as an SNS message: a JSON object of strings, each
// key once (a second value of a signed field would be read by the
// service behind, unsigned), of a type SNS sends.
func readSNS(body []byte) (*snsMessage, error) {
	fields, err := jsonStrings(body, snsFields)
	if err != nil {
		return nil, fmt.Errorf("%w: the body is not an SNS message: %v", ErrMalformedBody, err)
	}
	m := &snsMessage{Type: fields["Type"], MessageID: fields["MessageId"], TopicArn: fields["TopicArn"],
		Message: fields["Message"], Timestamp: fields["Timestamp"], Token: fields["Token"], SubscribeURL: fields["SubscribeURL"],
		SignatureVersion: fields["SignatureVersion"], Signature: fields["Signature"], SigningCertURL: fields["SigningCertURL"]}
	if s, ok := fields["Subject"]; ok {
		m.Subject = &s
	}
	switch m.Type {
	case "Notification", "SubscriptionConfirmation", "UnsubscribeConfirmation":
	default:
		return nil, fmt.Errorf("%w: Type %q is not an SNS message's", ErrMalformedBody, m.Type)
	}
	for _, f := range []string{"MessageId", "TopicArn", "Timestamp", "SignatureVersion", "Signature", "SigningCertURL"} {
		if fields[f] == "" {
			return nil, fmt.Errorf("%w: the SNS message has no %s", ErrMalformedBody, f)
		}
	}
	if m.Type != "Notification" && (m.Token == "" || m.SubscribeURL == "") {
		return nil, fmt.Errorf("%w: a %s has a Token and a SubscribeURL", ErrMalformedBody, m.Type)
	}
	return m, nil
}

// ErrMalformedBody means the body is not what the scheme reads (400
// malformed_body).
var ErrMalformedBody = errors.New("malformed body")

// snsFields are the fields of an SNS message, each a string.
var snsFields = []string{"Type", "MessageId", "Token", "TopicArn", "Subject", "Message", "Timestamp", "SignatureVersion",
	"Signature", "SigningCertURL", "SubscribeURL", "UnsubscribeURL"}

// jsonStrings reads body's one JSON object (jsonMembers): its string
// members. It refuses a member named in strs that is not a string (a
// signed string would leave it out), or is spelled in another case.
func jsonStrings(body []byte, strs []string) (map[string]string, error) {
	members, err := jsonMembers(body)
	if err != nil {
		return nil, err
	}
	fields := make(map[string]string, len(members))
	for key, v := range members {
		for _, f := range strs {
			if key != f && fold(key) == fold(f) {
				return nil, fmt.Errorf("%q is another spelling of %q", key, f)
			}
		}
		var s string
		if err := json.Unmarshal(v, &s); err == nil {
			fields[key] = s
		} else if slices.Contains(strs, key) {
			return nil, fmt.Errorf("%s is not a string", key)
		}
	}
	return fields, nil
}

// jsonMembersMax bounds the members of an object jsonMembers reads.
const jsonMembersMax = 256

// jsonMembers reads body's one JSON object, valid UTF-8 with nothing
// after it: its members, raw. It refuses a key given twice, also in
// another case or Unicode folding: a decoder that matches names so, as
// Go's encoding/json, would read the one the signature did not.
func jsonMembers(body []byte) (map[string]json.RawMessage, error) {
	if !utf8.Valid(body) || !json.Valid(body) {
		return nil, errors.New("not one JSON value")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New("not a JSON object")
	}
	members := make(map[string]json.RawMessage)
	folded := make(map[string]string)
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, errors.New("not JSON")
		}
		key := t.(string) // a member's name
		if other, seen := folded[fold(key)]; seen {
			return nil, fmt.Errorf("%q is given twice (as %q)", key, other)
		}
		if len(members) == jsonMembersMax {
			return nil, fmt.Errorf("over %d members", jsonMembersMax)
		}
		folded[fold(key)] = key
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, errors.New("not JSON")
		}
		members[key] = v
	}
	return members, nil
}

// fold is a key as a decoder that matches names without case sees it.
func fold(key string) string { return strings.ToLower(strings.ToUpper(key)) }

// verify checks r as an SNS message at now.
func (s *sns) verify(r Request, now time.Time, past, future time.Duration) (Delivery, *snsMessage, error) {
	if len(r.Body) > snsMaxField+16<<10 {
		return Delivery{}, nil, fmt.Errorf("%w: over SNS's 256 KiB", ErrMalformedBody)
	}
	m, err := readSNS(r.Body)
	if err != nil {
		return Delivery{}, nil, err
	}
	// The headers SNS adds are not signed: a service behind that routes by
	// them must see what the signature covers.
	for header, field := range map[string]string{"X-Amz-Sns-Message-Type": m.Type, "X-Amz-Sns-Message-Id": m.MessageID, "X-Amz-Sns-Topic-Arn": m.TopicArn} {
		v, err := single(r.Header, header)
		switch {
		case err != nil:
			return Delivery{}, nil, err
		case v != "" && v != field:
			return Delivery{}, nil, malformed(header, "differs from the signed message")
		}
	}
	if !slices.Contains(s.cfg.Topics, m.TopicArn) {
		return Delivery{}, nil, fmt.Errorf("%w: TopicArn %s is not among topics", ErrTopicNotAllowed, m.TopicArn)
	}
	h, ok := snsHash(m.SignatureVersion)
	if !ok {
		return Delivery{}, nil, fmt.Errorf("%w: SignatureVersion %q is not 1 or 2", ErrMalformedBody, m.SignatureVersion)
	}
	sig, err := base64.StdEncoding.DecodeString(m.Signature)
	if err != nil || len(sig) > 1024 {
		return Delivery{}, nil, fmt.Errorf("%w: Signature is not base64", ErrMalformedBody)
	}
	ts, err := time.Parse(time.RFC3339Nano, m.Timestamp)
	if err != nil {
		return Delivery{}, nil, fmt.Errorf("%w: Timestamp is not RFC 3339", ErrMalformedBody)
	}
	if err := s.allowed(m.SigningCertURL, true); err != nil {
		return Delivery{}, nil, err
	}
	ctx := r.Context
	if ctx == nil {
		ctx = context.Background()
	}
	pub, err := s.fetch.get(ctx, m.SigningCertURL, now, snsCertificate)
	if err != nil {
		return Delivery{}, nil, err
	}
	cert := pub.(*x509.Certificate)
	if now.Before(cert.NotBefore) || now.After(cert.NotAfter) {
		return Delivery{}, nil, fmt.Errorf("%w: the SigningCertURL's certificate is not valid now", ErrBadSignature)
	}
	digest := h.New()
	digest.Write(m.canonical())
	if rsa.VerifyPKCS1v15(cert.PublicKey.(*rsa.PublicKey), h, digest.Sum(nil), sig) != nil {
		return Delivery{}, nil, ErrBadSignature
	}
	if ts.Before(now.Add(-past)) {
		return Delivery{}, nil, fmt.Errorf("%w: %s old, tolerance %s", ErrTimestampOutOfTolerance, now.Sub(ts).Truncate(time.Second), past)
	}
	if future >= 0 && ts.After(now.Add(future)) {
		return Delivery{}, nil, fmt.Errorf("%w: %s in the future, tolerance %s", ErrTimestampOutOfTolerance, ts.Sub(now).Truncate(time.Second), future)
	}
	return Delivery{ID: m.MessageID, Timestamp: ts.Truncate(time.Second), Key: KeyID}, m, nil
}

// snsCertificate reads a fetched SigningCertURL: one PEM certificate of
// an RSA key, used for an hour.
func snsCertificate(body []byte, _ http.Header) (any, time.Duration, error) {
	block, _ := pem.Decode(body)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, 0, errors.New("the answer is not a PEM certificate")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, 0, errors.New("the certificate does not parse")
	}
	if _, ok := cert.PublicKey.(*rsa.PublicKey); !ok {
		return nil, 0, errors.New("the certificate's key is not RSA")
	}
	return cert, snsCertTTL, nil
}

// allowed checks a URL SNS names: https, on a CertHosts host, without
// credentials; a certificate's path ends in .pem.
func (s *sns) allowed(raw string, cert bool) error {
	u, err := url.Parse(raw)
	what := "SubscribeURL"
	if cert {
		what = "SigningCertURL"
	}
	switch {
	case err != nil || u.Scheme != "https" || u.User != nil || u.Fragment != "":
		return fmt.Errorf("%w: the %s is not an https URL", ErrCertURLNotAllowed, what)
	case cert && (!strings.HasSuffix(u.Path, ".pem") || u.RawQuery != ""):
		return fmt.Errorf("%w: the %s's path does not end in .pem", ErrCertURLNotAllowed, what)
	case !s.hostAllowed(u):
		return fmt.Errorf("%w: the %s's host %s is not among cert_hosts", ErrCertURLNotAllowed, what, u.Host)
	case cert && len(s.cfg.CertHosts) == 0 && !snsCertPath.MatchString(u.Path):
		// SNS's own certificates only: a request naming another path on
		// SNS's host would spend the fetches' budget for nothing.
		return fmt.Errorf("%w: the %s's path is not one of SNS's certificates", ErrCertURLNotAllowed, what)
	}
	return nil
}

// hostAllowed reports whether u's host is one CertHosts allows.
func (s *sns) hostAllowed(u *url.URL) bool {
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if len(s.cfg.CertHosts) == 0 {
		return (port == "" || port == "443") && snsRegionHost.MatchString(host)
	}
	for _, pattern := range s.cfg.CertHosts {
		ph, pp, err := net.SplitHostPort(pattern)
		if err != nil {
			ph, pp = pattern, "443"
		}
		if (port == pp || (port == "" && pp == "443")) && globHost(strings.ToLower(ph), host) {
			return true
		}
	}
	return false
}

// globHost reports whether host matches pattern, label by label; a *
// label matches any one label.
func globHost(pattern, host string) bool {
	pl, hl := strings.Split(pattern, "."), strings.Split(host, ".")
	if len(pl) != len(hl) {
		return false
	}
	for i := range pl {
		if hl[i] == "" || (pl[i] != "*" && pl[i] != hl[i]) {
			return false
		}
	}
	return true
}

// confirm confirms m's subscription: a GET of its SubscribeURL, which
// must be on an allowed host too.
func (s *sns) confirm(ctx context.Context, m *snsMessage) error {
	if err := s.allowed(m.SubscribeURL, false); err != nil {
		return err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.SubscribeURL, nil)
	if err != nil {
		return fmt.Errorf("%w: the SubscribeURL does not parse", ErrNotConfirmed)
	}
	resp, err := s.fetch.client.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %s", ErrNotConfirmed, fetchError(err))
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: the SubscribeURL answered %s", ErrNotConfirmed, resp.Status)
	}
	return nil
}

// sign writes body's SNS message signed: the fields the signer fills in
// (MessageId from id, Timestamp from ts when absent; SignatureVersion 2
// when absent; SigningCertURL; Signature), and SNS's headers.
func (s *sns) sign(body []byte, id string, ts time.Time) (http.Header, []byte, error) {
	if s.signer == nil || s.cfg.signingCertURL == "" {
		return nil, nil, errors.New("sns signs with an RSA private key (PKCS#8 PEM) and the SigningCertURL of its certificate")
	}
	var fields map[string]any
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		return nil, nil, errors.New("sns signs an SNS message: a JSON object with Type, TopicArn and Message")
	}
	set := func(k, v string) {
		if s, _ := fields[k].(string); s == "" {
			fields[k] = v
		}
	}
	set("Type", "Notification")
	set("MessageId", id)
	set("Timestamp", ts.UTC().Format("2006-01-02T15:04:05.000Z"))
	set("SignatureVersion", "2")
	fields["SigningCertURL"] = s.cfg.signingCertURL
	fields["Signature"] = "-" // a placeholder readSNS needs
	out, _ := json.Marshal(fields)
	m, err := readSNS(out)
	if err != nil {
		return nil, nil, err
	}
	h, ok := snsHash(m.SignatureVersion)
	if !ok {
		return nil, nil, errors.New("sns: SignatureVersion is 1 or 2")
	}
	digest := h.New()
	digest.Write(m.canonical())
	sig, err := rsa.SignPKCS1v15(rand.Reader, s.signer, h, digest.Sum(nil))
	if err != nil {
		return nil, nil, err
	}
	fields["Signature"] = base64.StdEncoding.EncodeToString(sig)
	out, _ = json.Marshal(fields)
	return http.Header{
		"Content-Type":           {"text/plain; charset=UTF-8"},
		"X-Amz-Sns-Message-Type": {m.Type},
		"X-Amz-Sns-Message-Id":   {m.MessageID},
		"X-Amz-Sns-Topic-Arn":    {m.TopicArn},
	}, out, nil
}
