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
	// attempt sends on; "*" among them keeps every header but those
	// unkept unless named beside it: the credentials (Cookie,
	// Authorization, the verified scheme's signature and timestamp), the
	// forwarding headers and the trace context (see unvouched). Hop-by-hop
	// headers, Host, Content-Length, Expect, Content-Type (the envelope's
	// own) and Hookgate- headers are never kept. Default none.
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

// The bounds on what an envelope keeps of a request's headers (and its
// path, with keep_path): past either, 431 headers_too_large, and nothing
// is stored.
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

// unvouched are kept by keep_headers * only when named: the forwarding
// headers and the trace context. Sent on by the gateway, they would say
// what it did not check: a client's address or host (reverse_proxy drops
// or rewrites them), a trace the provider chose; each attempt carries
// the enqueue's own trace context.
var unvouched = []string{
	"Forwarded", "Via", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Forwarded-Port",
	"X-Forwarded-Prefix", "X-Real-Ip", "Traceparent", "Tracestate", "Baggage",
}

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
	// Headers the request's Connection names are hop-by-hop too.
	var connection []string
	for _, v := range r.Header["Connection"] {
		for tok := range strings.SplitSeq(v, ",") {
			connection = append(connection, http.CanonicalHeaderKey(strings.TrimSpace(tok)))
		}
	}
	lines, size := 0, len(rec.Path)
	for name, vals := range r.Header {
		if !o.keeps(name, credentials) || o.all && slices.Contains(connection, name) && !slices.Contains(o.named, name) {
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
		return nil, refuse(problem.HeadersTooLarge, "the request has %d header lines (%d bytes with the kept path) to keep, over %d lines or %d bytes: "+
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
	return o.all && !slices.Contains(hopByHop, name) && !slices.Contains(credentials, name) && !slices.Contains(unvouched, name) &&
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
