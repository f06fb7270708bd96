package verify

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	twilioclient "github.com/twilio/twilio-go/client"
)

// The worked example of Twilio's docs and reference-library tests
// (twilio-go client/request_validator_test.go, twilio-python
// tests/unit/test_request_validator.py): auth token 12345, this URL, and
// the form parameters of a call.
const (
	twilioToken = "12345"
	twilioURL   = "https://mycompany.com/myapp.php?foo=1&bar=2"
	// twilioJSON and its SHA-256, the libraries' body-hash example.
	twilioJSON     = `{"property": "value", "boolean": true}`
	twilioJSONHash = "0a1ff7634d9ab3b95db5c9a2dfe9416e41502b283a80c7cf19632632f96e6620"
	formType       = "application/x-www-form-urlencoded"
)

// twilioCall returns the example call's parameters, with the caller's
// number: the libraries' tests use +14158675309, the docs' snippet
// +14158675310.
func twilioCall(caller string) url.Values {
	return url.Values{
		"CallSid": {"CA1234567890ABCDE"}, "Caller": {caller}, "Digits": {"1234"},
		"From": {caller}, "To": {"+18005551212"},
	}
}

// twilioRequest is a request to u with the signature sig, the body and
// its type.
func twilioRequest(u, sig, contentType string, body []byte) Request {
	h := http.Header{}
	if sig != "" {
		h.Set("X-Twilio-Signature", sig)
	}
	if contentType != "" {
		h.Set("Content-Type", contentType)
	}
	return Request{Method: http.MethodPost, URL: u, Header: h, Body: body}
}

var twilioVectors = []struct {
	name      string
	url       string // as the receiver sees it
	signedURL string // as Twilio signed it: url, or url with its port toggled
	typ       string
	body      string
	sig       string
}{
	{
		name: "libraries' form example", url: twilioURL, signedURL: twilioURL,
		typ: formType, body: twilioCall("+14158675309").Encode(), sig: "RSOYDt4T1cUTdK1PDd93/VVr8B8=",
	},
	{
		// Twilio docs, "Validating signatures from Twilio" (api-snippets security/signature_validation).
		name: "docs' form example", url: twilioURL, signedURL: twilioURL,
		typ: formType, body: twilioCall("+14158675310").Encode(), sig: "GvWf1cFY/Q7PnoempGyD5oXAezc=",
	},
	{
		name: "https, a port called, signed without it", url: strings.Replace(twilioURL, ".com", ".com:1234", 1), signedURL: twilioURL,
		typ: formType, body: twilioCall("+14158675309").Encode(), sig: "RSOYDt4T1cUTdK1PDd93/VVr8B8=",
	},
	{
		name: "https, no port called, signed with 443", url: twilioURL, signedURL: strings.Replace(twilioURL, ".com", ".com:443", 1),
		typ: formType, body: twilioCall("+14158675309").Encode(), sig: "kvajT1Ptam85bY51eRf/AJRuM3w=",
	},
	{
		name: "http, no port called, signed with 80", url: "http" + twilioURL[5:], signedURL: strings.Replace("http"+twilioURL[5:], ".com", ".com:80", 1),
		typ: formType, body: twilioCall("+14158675309").Encode(), sig: "0ZXoZLH/DfblKGATFgpif+LLRf4=",
	},
	{
		name: "http, a port called and signed", url: strings.Replace("http"+twilioURL[5:], ".com", ".com:1234", 1), signedURL: strings.Replace("http"+twilioURL[5:], ".com", ".com:1234", 1),
		typ: formType, body: twilioCall("+14158675309").Encode(), sig: "Zmvh+3yNM1Phv2jhDCwEM3q5ebU=",
	},
	{
		// twilio-python's MultiDict and QueryDict cases: a name given twice.
		name: "a parameter given twice", url: twilioURL, signedURL: twilioURL,
		typ: formType, body: "Sid=CA123&SidAccount=AC123&Digits=5678&Digits=1234", sig: "IK+Dwps556ElfBT0I3Rgjkr1wJU=",
	},
	{
		name: "JSON body with bodySHA256", url: twilioURL + "&bodySHA256=" + twilioJSONHash, signedURL: twilioURL + "&bodySHA256=" + twilioJSONHash,
		typ: "application/json", body: twilioJSON, sig: "a9nBmqA0ju/hNViExpshrM61xv4=",
	},
	{
		name: "JSON body, bodySHA256 alone in the query", url: "https://mycompany.com/myapp.php?bodySHA256=" + twilioJSONHash, signedURL: "https://mycompany.com/myapp.php?bodySHA256=" + twilioJSONHash,
		typ: "application/json", body: twilioJSON, sig: "y77kIzt2vzLz71DgmJGsen2scGs=",
	},
}

// TestTwilioVectors checks Twilio's published examples both ways, byte
// for byte: ours verifies Twilio's signature, and signs the URL Twilio
// signed into the same signature. One changed body byte fails.
func TestTwilioVectors(t *testing.T) {
	v := mustNew(t, "twilio", []string{twilioToken}, Options{})
	for _, tt := range twilioVectors {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := v.Verify(twilioRequest(tt.url, tt.sig, tt.typ, []byte(tt.body)), t0); err != nil {
				t.Fatalf("Verify: %v", err)
			}
			h, err := v.SignRequest(twilioRequest(tt.signedURL, "", tt.typ, []byte(tt.body)), "", t0)
			if err != nil {
				t.Fatalf("SignRequest: %v", err)
			}
			if got := h.Get("X-Twilio-Signature"); got != tt.sig {
				t.Errorf("signature = %q, want %q", got, tt.sig)
			}
			if got := h.Get("I-Twilio-Idempotency-Token"); got != "" {
				t.Errorf("a token without an ID: %q", got)
			}
			changed := []byte(tt.body)
			changed[len(changed)-2] ^= 1
			if _, err := v.Verify(twilioRequest(tt.url, tt.sig, tt.typ, changed), t0); !errors.Is(err, ErrBadSignature) {
				t.Errorf("changed body: err = %v, want ErrBadSignature", err)
			}
		})
	}
}

// TestTwilioReferenceLibrary checks ours against twilio-go's
// RequestValidator: it accepts what ours signs, at the URL signed and with
// the port toggled, and ours accepts the signatures its tests accept
// (TestTwilioVectors).
func TestTwilioReferenceLibrary(t *testing.T) {
	lib := twilioclient.NewRequestValidator(twilioToken)
	v := mustNew(t, "twilio", []string{twilioToken}, Options{})
	params := map[string]string{"AccountSid": "AC1", "Body": "Hello, wörld & co?", "From": "+15005550006", "NumMedia": "0", "MessageSid": "SM1"}
	form := url.Values{}
	for k, val := range params {
		form.Set(k, val)
	}
	for _, u := range []string{
		"https://hooks.example.com/sms?tenant=a%20b",
		"https://hooks.example.com:8443/sms",
		"http://127.0.0.1:8080/sms",
		"https://user:pass@hooks.example.com/sms",
		"http://[::1]:8080/sms?x=1",
	} {
		t.Run(u, func(t *testing.T) {
			h, err := v.SignRequest(twilioRequest(u, "", formType, []byte(form.Encode())), "", t0)
			if err != nil {
				t.Fatal(err)
			}
			sig := h.Get("X-Twilio-Signature")
			if !lib.Validate(u, params, sig) {
				t.Errorf("twilio-go rejects our form signature")
			}
			body := []byte(`{"MessageSid":"SM1"}`)
			sum := sha256.Sum256(body)
			withHash := u + map[bool]string{true: "&", false: "?"}[strings.Contains(u, "?")] + "bodySHA256=" + hex.EncodeToString(sum[:])
			h, err = v.SignRequest(twilioRequest(withHash, "", "application/json", body), "", t0)
			if err != nil {
				t.Fatal(err)
			}
			if !lib.ValidateBody(withHash, body, h.Get("X-Twilio-Signature")) {
				t.Errorf("twilio-go rejects our JSON signature")
			}
			if lib.ValidateBody(withHash, append(body, ' '), h.Get("X-Twilio-Signature")) {
				t.Errorf("twilio-go accepts a changed body: the test proves nothing")
			}
		})
	}
}

// TestTwilioRejects: a changed URL, form parameter or body fails the
// signature; a missing, repeated or undecodable header, and a body the
// signature would not cover, are malformed.
func TestTwilioRejects(t *testing.T) {
	v := mustNew(t, "twilio", []string{twilioToken}, Options{})
	body := twilioCall("+14158675309").Encode()
	const sig = "RSOYDt4T1cUTdK1PDd93/VVr8B8="
	if _, err := v.Verify(twilioRequest(twilioURL, sig, formType, []byte(body)), t0); err != nil {
		t.Fatalf("the genuine request: %v", err)
	}
	bad := []struct {
		name string
		r    Request
		want error
	}{
		{"another path", twilioRequest(strings.Replace(twilioURL, "myapp", "myapq", 1), sig, formType, []byte(body)), ErrBadSignature},
		{"another query", twilioRequest(twilioURL+"&x=1", sig, formType, []byte(body)), ErrBadSignature},
		{"another host", twilioRequest(strings.Replace(twilioURL, "mycompany", "evil", 1), sig, formType, []byte(body)), ErrBadSignature},
		{"http for https", twilioRequest("http"+twilioURL[5:], sig, formType, []byte(body)), ErrBadSignature},
		{"another port than 443", twilioRequest(strings.Replace(twilioURL, ".com", ".com:444", 1), "kvajT1Ptam85bY51eRf/AJRuM3w=", formType, []byte(body)), ErrBadSignature},
		{"a changed value", twilioRequest(twilioURL, sig, formType, []byte(strings.Replace(body, "1234", "1235", 1))), ErrBadSignature},
		{"a changed name", twilioRequest(twilioURL, sig, formType, []byte(strings.Replace(body, "Digits", "Digitz", 1))), ErrBadSignature},
		{"an added parameter", twilioRequest(twilioURL, sig, formType, []byte(body+"&Extra=1")), ErrBadSignature},
		{"a dropped parameter", twilioRequest(twilioURL, sig, formType, []byte(strings.Replace(body, "Digits=1234&", "", 1))), ErrBadSignature},
		{"another auth token", twilioRequest(twilioURL, "GvWf1cFY/Q7PnoempGyD5oXAezc=", formType, []byte(body)), ErrBadSignature},
		{"no URL", twilioRequest("", sig, formType, []byte(body)), ErrBadSignature},
		{"a relative URL", twilioRequest("/myapp.php?foo=1&bar=2", sig, formType, []byte(body)), ErrBadSignature},
		{"no signature", twilioRequest(twilioURL, "", formType, []byte(body)), ErrMissingHeader},
		{"a signature not base64", twilioRequest(twilioURL, "RSOYDt4T1cUTdK1PDd93/VVr8B8", formType, []byte(body)), ErrMalformedHeader},
		{"a body not a form, and no bodySHA256", twilioRequest(twilioURL, sig, "application/json", []byte(twilioJSON)), ErrMalformedHeader},
		{"a form that does not parse", twilioRequest(twilioURL, sig, formType, []byte("a=%zz")), ErrMalformedHeader},
		{"a JSON body not the bodySHA256's", twilioRequest(twilioURL+"&bodySHA256="+twilioJSONHash, "a9nBmqA0ju/hNViExpshrM61xv4=", "application/json", []byte(`{}`)), ErrBadSignature},
		{"an empty bodySHA256", twilioRequest(twilioURL+"&bodySHA256=", "a9nBmqA0ju/hNViExpshrM61xv4=", "application/json", []byte(twilioJSON)), ErrBadSignature},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := v.Verify(tt.r, t0); !errors.Is(err, tt.want) {
				t.Errorf("err = %v, want %v", err, tt.want)
			}
		})
	}
	for _, name := range []string{"X-Twilio-Signature", "I-Twilio-Idempotency-Token", "Content-Type"} {
		t.Run(name+" twice", func(t *testing.T) {
			r := twilioRequest(twilioURL, sig, formType, []byte(body))
			r.Header.Set("I-Twilio-Idempotency-Token", "idem-1")
			r.Header.Add(name, r.Header.Get(name))
			if _, err := v.Verify(r, t0); !errors.Is(err, ErrMalformedHeader) {
				t.Errorf("err = %v, want ErrMalformedHeader", err)
			}
		})
	}
}

// TestTwilioForms: the parameters are signed decoded and in name order,
// each value once, as the reference libraries sign them: the order of the
// body and a repeated pair do not matter, and a body-less request (a GET
// callback, its parameters in the URL) signs the URL alone.
func TestTwilioForms(t *testing.T) {
	v := mustNew(t, "twilio", []string{twilioToken}, Options{})
	const dup = "IK+Dwps556ElfBT0I3Rgjkr1wJU="
	for _, body := range []string{
		"Digits=1234&Digits=5678&SidAccount=AC123&Sid=CA123",
		"Sid=CA123&Digits=5678&SidAccount=AC123&Digits=1234&Digits=5678",
		"Sid=CA%31%323&SidAccount=AC123&Digits=5678&Digits=1234",
	} {
		for _, typ := range []string{formType, "Application/X-WWW-Form-Urlencoded; charset=utf-8"} {
			if _, err := v.Verify(twilioRequest(twilioURL, dup, typ, []byte(body)), t0); err != nil {
				t.Errorf("%s (%s): %v", body, typ, err)
			}
		}
	}
	get := "https://mycompany.com/myapp.php?CallSid=CA1&Digits=1234"
	h, err := v.SignRequest(Request{Method: http.MethodGet, URL: get}, "", t0)
	if err != nil {
		t.Fatal(err)
	}
	want := http.Header{"X-Twilio-Signature": {"Ri9dMCc05mmEBVPQcW429mQLqqw="}}
	if diff := cmp.Diff(want, h); diff != "" {
		t.Errorf("GET signature (-want +got):\n%s", diff)
	}
	r := Request{Method: http.MethodGet, URL: get, Header: h}
	if _, err := v.Verify(r, t0); err != nil {
		t.Errorf("GET: %v", err)
	}
	r.URL = strings.Replace(get, "1234", "1235", 1)
	if _, err := v.Verify(r, t0); !errors.Is(err, ErrBadSignature) {
		t.Errorf("GET with a changed query: err = %v, want ErrBadSignature", err)
	}
}

// TestTwilioSignRequest: the sender signs the URL as given, carries the
// delivery ID as the idempotency token, and is told what a JSON body's
// URL lacks.
func TestTwilioSignRequest(t *testing.T) {
	v := mustNew(t, "twilio", []string{twilioToken, "an older token"}, Options{})
	if !v.SignsURL() {
		t.Fatal("twilio does not sign the URL")
	}
	if h := v.Sign("msg_1", t0, []byte("a=1")); h != nil {
		t.Errorf("Sign with no URL = %v, want nil", h)
	}
	r := twilioRequest(twilioURL, "", formType, []byte(twilioCall("+14158675309").Encode()))
	h, err := v.SignRequest(r, "idem-1", t0)
	if err != nil {
		t.Fatal(err)
	}
	want := http.Header{"X-Twilio-Signature": {"RSOYDt4T1cUTdK1PDd93/VVr8B8="}, "I-Twilio-Idempotency-Token": {"idem-1"}}
	if diff := cmp.Diff(want, h); diff != "" {
		t.Errorf("headers (-want +got):\n%s", diff)
	}
	r.Header = h.Clone()
	r.Header.Set("Content-Type", formType)
	d, err := v.Verify(r, t0)
	if err != nil || d.ID != "idem-1" || !d.Timestamp.IsZero() {
		t.Errorf("Verify = %+v, %v; want ID idem-1, no timestamp", d, err)
	}
	// The token is not signed: with it or without, dedupe keys by the
	// signature, which every copy of the request carries.
	sum := sha256.Sum256(mustBase64(t, "RSOYDt4T1cUTdK1PDd93/VVr8B8="))
	if d.Key != KeySignature || d.SignatureSHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("with a token: Key %v, SignatureSHA256 %q; want KeySignature, the signature's hash", d.Key, d.SignatureSHA256)
	}
	r.Header.Del("I-Twilio-Idempotency-Token")
	if d2, err := v.Verify(r, t0); err != nil || d2.ID != "" || d2.SignatureSHA256 != d.SignatureSHA256 {
		t.Errorf("without a token: Verify = %+v, %v; want no ID, the same signature hash", d2, err)
	}

	_, err = v.SignRequest(twilioRequest(twilioURL, "", "application/json", []byte(twilioJSON)), "", t0)
	if err == nil || !strings.Contains(err.Error(), "bodySHA256="+twilioJSONHash) {
		t.Errorf("a JSON body and no bodySHA256: err = %v, want the hint bodySHA256=%s", err, twilioJSONHash)
	}
	_, err = v.SignRequest(twilioRequest(twilioURL+"&bodySHA256=00", "", "application/json", []byte(twilioJSON)), "", t0)
	if err == nil || !strings.Contains(err.Error(), twilioJSONHash) {
		t.Errorf("a wrong bodySHA256: err = %v, want the body's hash", err)
	}
	for _, u := range []string{"", "mycompany.com/myapp.php"} {
		if _, err := v.SignRequest(twilioRequest(u, "", formType, nil), "", t0); err == nil {
			t.Errorf("SignRequest to %q: no error", u)
		}
	}
}

// TestTwilioRotation: any configured token verifies; the first signs.
func TestTwilioRotation(t *testing.T) {
	body := []byte("CallSid=CA1&CallStatus=completed")
	old := mustNew(t, "twilio", []string{"old token"}, Options{})
	next := mustNew(t, "twilio", []string{"next token"}, Options{})
	both := mustNew(t, "twilio", []string{"next token", "old token"}, Options{})
	for name, s := range map[string]*Verifier{"old": old, "next": next} {
		h, err := s.SignRequest(twilioRequest(twilioURL, "", formType, body), "idem", t0)
		if err != nil {
			t.Fatal(err)
		}
		r := twilioRequest(twilioURL, h.Get("X-Twilio-Signature"), formType, body)
		if _, err := both.Verify(r, t0); err != nil {
			t.Errorf("signed with the %s token: %v", name, err)
		}
		if name == "old" {
			if _, err := next.Verify(r, t0); !errors.Is(err, ErrBadSignature) {
				t.Errorf("the old token's signature, the next token only: err = %v, want ErrBadSignature", err)
			}
		}
	}
}

func TestTwilioURLs(t *testing.T) {
	for _, tt := range []struct{ in, other string }{
		{"https://a.example/p?q=1#f", "https://a.example:443/p?q=1#f"},
		{"http://a.example", "http://a.example:80"},
		{"HTTPS://a.example?x", "HTTPS://a.example:443?x"},
		{"https://a.example:8443/p", "https://a.example/p"},
		{"https://u:p@a.example/p", "https://u:p@a.example:443/p"},
		{"https://u:p@a.example:1/p", "https://u:p@a.example/p"},
		{"http://[::1]/p", "http://[::1]:80/p"},
		{"http://[::1]:8080/p", "http://[::1]/p"},
		{"https://a.example/p:1", "https://a.example:443/p:1"},
	} {
		got, err := twilioURLs(tt.in)
		if err != nil {
			t.Errorf("%s: %v", tt.in, err)
			continue
		}
		if diff := cmp.Diff([]string{tt.in, tt.other}, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.in, diff)
		}
	}
}

func FuzzTwilio(f *testing.F) {
	f.Add(twilioURL, "RSOYDt4T1cUTdK1PDd93/VVr8B8=", formType, []byte(twilioCall("+14158675309").Encode()))
	f.Add(twilioURL+"&bodySHA256="+twilioJSONHash, "a9nBmqA0ju/hNViExpshrM61xv4=", "application/json", []byte(twilioJSON))
	f.Add("http://[::1]:80/p?a=%zz;b#x", "=", "multipart/form-data", []byte("a=%zz&b=1;c"))
	f.Add("https://u@h:/?bodySHA256", "", "", []byte(nil))
	f.Add("://", "AAAA", formType+"; charset", []byte("=&=&a"))
	v, err := New("twilio", []string{twilioToken, "another token"}, Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, u, sig, typ string, body []byte) {
		_, err := v.Verify(twilioRequest(u, sig, typ, body), t0)
		checkErr(t, err)
		checkTwilioParams(t, body)
		// Whatever signs, verifies, also when signed with the port
		// toggled; and not with a parameter more in the body.
		forms, err := twilioURLs(u)
		if err != nil {
			return
		}
		for _, signedURL := range forms {
			h, err := v.SignRequest(twilioRequest(signedURL, "", typ, body), "", t0)
			if err != nil {
				return
			}
			signed := twilioRequest(u, h.Get("X-Twilio-Signature"), typ, body)
			if _, err := v.Verify(signed, t0); err != nil {
				t.Fatalf("signed for %q, rejected at %q: %v", signedURL, u, err)
			}
			if q, _ := url.ParseQuery(string(body)); q.Has("x") {
				continue // x= again adds nothing: each value is signed once
			}
			signed.Body = append(bytes.Clone(body), "&x"...)
			if _, err := v.Verify(signed, t0); err == nil {
				t.Fatalf("a body with a parameter more accepted")
			}
		}
	})
}

// checkTwilioParams: the form's canonical content, read in one pass into a
// pooled buffer, is what url.ParseQuery and the reference libraries'
// sort make of the body, and each refuses what the other does; past
// maxTwilioParams, the body is refused before it is parsed.
func checkTwilioParams(t *testing.T, body []byte) {
	t.Helper()
	f, err := twilioParams(Request{Header: http.Header{"Content-Type": {formType}}, Body: body})
	if bytes.Count(body, []byte{'&'})+1 > maxTwilioParams {
		if !errors.Is(err, ErrMalformedHeader) {
			t.Fatalf("%d parameters: err = %v, want ErrMalformedHeader", bytes.Count(body, []byte{'&'})+1, err)
		}
		return
	}
	values, rerr := url.ParseQuery(string(body))
	if (err == nil) != (rerr == nil) {
		t.Fatalf("twilioParams err = %v, url.ParseQuery err = %v", err, rerr)
	}
	if err != nil {
		if !errors.Is(err, ErrMalformedHeader) {
			t.Fatalf("err = %v, want ErrMalformedHeader", err)
		}
		return
	}
	defer f.free()
	var want, got []byte
	for _, name := range slices.Sorted(maps.Keys(values)) {
		for _, v := range slices.Compact(slices.Sorted(slices.Values(values[name]))) {
			want = append(append(want, name...), v...)
		}
	}
	for _, pr := range f.pairs {
		got = append(got, f.decoded[pr.start:pr.end]...)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("canonical content %q, want %q", got, want)
	}
}

// TestTwilioParamsBound: a form of more parameters than Twilio sends is
// refused before it is parsed; one at the bound verifies.
func TestTwilioParamsBound(t *testing.T) {
	v := mustNew(t, "twilio", []string{twilioToken}, Options{})
	form := func(n int) []byte {
		return []byte(strings.TrimSuffix(strings.Repeat("Digit=1&", n), "&"))
	}
	at := form(maxTwilioParams)
	h, err := v.SignRequest(twilioRequest(twilioURL, "", formType, at), "", t0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(twilioRequest(twilioURL, h.Get("X-Twilio-Signature"), formType, at), t0); err != nil {
		t.Errorf("%d parameters: %v", maxTwilioParams, err)
	}
	_, err = v.Verify(twilioRequest(twilioURL, h.Get("X-Twilio-Signature"), formType, form(maxTwilioParams+1)), t0)
	if !errors.Is(err, ErrMalformedHeader) || !strings.Contains(err.Error(), "over 1000") {
		t.Errorf("%d parameters: err = %v, want ErrMalformedHeader naming the bound", maxTwilioParams+1, err)
	}
}

// BenchmarkTwilio measures one verification of a typical form callback
// with two tokens configured (the first one misses), against the port
// toggled too.
func BenchmarkTwilio(b *testing.B) {
	form := twilioCall("+14158675309")
	form.Set("Body", strings.Repeat("x", 600))
	body := []byte(form.Encode())
	signer := mustNewB(b, "twilio", []string{twilioToken})
	v := mustNewB(b, "twilio", []string{"another token", twilioToken})
	h, err := signer.SignRequest(twilioRequest(twilioURL, "", formType, body), "idem", t0)
	if err != nil {
		b.Fatal(err)
	}
	r := twilioRequest(twilioURL, h.Get("X-Twilio-Signature"), formType, body)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Verify(r, t0); err != nil {
			b.Fatal(err)
		}
	}
}

func mustBase64(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
