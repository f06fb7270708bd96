package intake

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/hookgate/hookgate/internal/problem"
	"github.com/hookgate/hookgate/sender"
)

// Options are webhook_enqueue's settings for durable ingress: what an
// envelope keeps of the request beyond its body and its Content-Type,
// and how the provider is answered. Check them once (Provision).
type Options struct {
	// KeepHeaders names the request headers the envelope keeps and each
	// attempt sends on; "*" among them keeps every header but Cookie,
	// Authorization and the verified scheme's signature and timestamp
	// headers, unless named beside it. Hop-by-hop headers, Host and
	// Content-Length are never kept. Default none.
	KeepHeaders []string `json:"keep_headers,omitempty"`
	// KeepPath appends the request's path and query, cleaned, to the
	// destination's URL.
	KeepPath bool `json:"keep_path,omitempty"`
	// RedactHeaders names kept headers whose values are masked wherever
	// the envelope is shown; they are sent as they came.
	RedactHeaders []string `json:"redact_headers,omitempty"`
	// AnswerStatus is the 2xx status the provider is answered once the
	// event is stored, a duplicate too. Default 202, with the enqueue's
	// JSON; with AnswerBody (text), that body instead.
	AnswerStatus int    `json:"answer_status,omitempty"`
	AnswerBody   string `json:"answer_body,omitempty"`

	all   bool     // KeepHeaders holds "*"
	named []string // KeepHeaders but "*"
}

// The bounds on what an envelope keeps of a request's headers: past
// either, 431 headers_too_large, and nothing is stored.
const (
	MaxKeptHeaders     = 64       // header lines: a repeated header counts once per value
	MaxKeptHeaderBytes = 16 << 10 // names and values
)

// hopByHop are the headers that describe one connection (RFC 9110,
// section 7.6.1), those of the connection's framing, and Expect, which
// asks the next hop for an interim answer: never kept, not even named.
var hopByHop = []string{
	"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate", "Proxy-Authorization",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade", "Http2-Settings", "Host", "Content-Length", "Expect",
}

// credentials are kept by keep_headers * only when named.
var credentials = []string{"Authorization", "Cookie"}

// ParseAnswer reads answer's arguments: <status> [<body>].
func (o *Options) ParseAnswer(args []string) error {
	if len(args) < 1 || len(args) > 2 {
		return errors.New("answer takes a status and an optional body: answer 200 [ok]")
	}
	n, err := strconv.Atoi(args[0])
	if err != nil {
		return fmt.Errorf("answer: %q is not a status", args[0])
	}
	o.AnswerStatus = n
	if len(args) == 2 {
		o.AnswerBody = args[1]
	}
	return nil
}

// Check makes the names canonical and refuses what cannot be kept: a
// hop-by-hop header, Content-Type (the envelope keeps it as its own),
// a Hookgate- header (each attempt sets its own), a name that is not a
// token; and an answer that is not 2xx (the provider would retry what is
// stored).
func (o *Options) Check() error {
	o.all = slices.Contains(o.KeepHeaders, "*")
	o.named = slices.DeleteFunc(slices.Clone(o.KeepHeaders), func(s string) bool { return s == "*" })
	for _, list := range []*[]string{&o.named, &o.RedactHeaders} {
		for i, name := range *list {
			canon := http.CanonicalHeaderKey(name)
			switch {
			case name == "*":
				return errors.New("redact_headers takes names, not *")
			case !validName(name):
				return fmt.Errorf("%q is not a header name", name)
			case slices.Contains(hopByHop, canon):
				return fmt.Errorf("%s describes the connection to hookgate: it is never kept", canon)
			case canon == "Content-Type":
				return errors.New("Content-Type is kept always, as the envelope's content type: do not name it")
			case strings.HasPrefix(canon, "Hookgate-"):
				return fmt.Errorf("%s is hookgate's own: each attempt sets its own Hookgate- headers", canon)
			}
			(*list)[i] = canon
		}
	}
	if o.AnswerStatus != 0 && (o.AnswerStatus < 200 || o.AnswerStatus > 299) {
		return fmt.Errorf("answer %d: the answer to a stored event is a 2xx status, or the provider retries it", o.AnswerStatus)
	}
	if o.AnswerStatus == 0 && o.AnswerBody != "" {
		return errors.New("an answer body needs its status: answer 200 <body>")
	}
	if o.AnswerBody != "" && (o.AnswerStatus == http.StatusNoContent || o.AnswerStatus == http.StatusResetContent) {
		return fmt.Errorf("answer %d has no body", o.AnswerStatus)
	}
	return nil
}

func validName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// Received is what o keeps of r, verified by scheme source ("" when no
// webhook_verify was in front) whose signature and timestamp are in the
// credentials headers: nil when it keeps nothing (no scheme, no header,
// no path). Past the bounds, a *Refusal: 431 headers_too_large.
func (o *Options) Received(r *http.Request, source string, credentials []string) (*sender.Received, error) {
	if source == "" && !o.all && len(o.named) == 0 && !o.KeepPath {
		return nil, nil
	}
	rec := &sender.Received{Source: source}
	if o.KeepPath {
		rec.Path = sender.ReceivedPath(r.URL)
	}
	lines, size := 0, 0
	for name, vals := range r.Header {
		if !o.keeps(name, credentials) {
			continue
		}
		if rec.Header == nil {
			rec.Header = http.Header{}
		}
		rec.Header[name] = vals
		lines += len(vals)
		for _, v := range vals {
			size += len(name) + len(v)
		}
	}
	if lines > MaxKeptHeaders || size > MaxKeptHeaderBytes {
		return nil, refuse(problem.HeadersTooLarge, "the request has %d header lines (%d bytes) to keep, over %d lines or %d bytes: "+
			"nothing is stored; keep fewer headers (a repeated header counts once per line)", lines, size, MaxKeptHeaders, MaxKeptHeaderBytes)
	}
	for _, name := range o.RedactHeaders {
		if _, ok := rec.Header[name]; ok {
			rec.Redact = append(rec.Redact, name)
		}
	}
	return rec, nil
}

// keeps reports whether o keeps the header name (canonical).
func (o *Options) keeps(name string, schemeCredentials []string) bool {
	if slices.Contains(o.named, name) {
		return true
	}
	return o.all && !slices.Contains(hopByHop, name) && !slices.Contains(credentials, name) &&
		!slices.Contains(schemeCredentials, name) && name != "Content-Type" && !strings.HasPrefix(name, "Hookgate-")
}

// answer writes o's answer to a stored event, when it sets one; it
// reports whether it did.
func (o *Options) answer(w http.ResponseWriter) bool {
	if o == nil || o.AnswerStatus == 0 {
		return false
	}
	if o.AnswerBody == "" {
		w.WriteHeader(o.AnswerStatus)
		return true
	}
	ct := "text/plain; charset=utf-8"
	if json.Valid([]byte(o.AnswerBody)) {
		ct = "application/json"
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Content-Length", strconv.Itoa(len(o.AnswerBody)))
	w.WriteHeader(o.AnswerStatus)
	_, _ = w.Write([]byte(o.AnswerBody)) // a provider gone away has nothing to be told
	return true
}
