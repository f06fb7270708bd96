package cli

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookgate/hookgate/verify"
)

// Twilio's documented example: auth token 12345, this URL, a call's form
// parameters, and the JSON body of its body-hash example.
const (
	twilioURL      = "https://mycompany.com/myapp.php?foo=1&bar=2"
	twilioCall     = "CallSid=CA1234567890ABCDE&Caller=%2B14158675309&Digits=1234&From=%2B14158675309&To=%2B18005551212"
	twilioJSON     = `{"property": "value", "boolean": true}`
	twilioJSONHash = "0a1ff7634d9ab3b95db5c9a2dfe9416e41502b283a80c7cf19632632f96e6620"
)

// TestSignTwilio: sign --scheme twilio signs --url: a body that is not
// JSON as a form (its default type under twilio), a JSON body through the
// URL's bodySHA256, which it names when the URL lacks it. The signatures
// are Twilio's own examples.
func TestSignTwilio(t *testing.T) {
	t.Setenv("HOOKGATE_SECRET", "12345")
	got := execute(t, "", "sign", "--scheme", "twilio", "--url", twilioURL, "--id", "idem-1", twilioCall)
	want := "I-Twilio-Idempotency-Token: idem-1\nX-Twilio-Signature: RSOYDt4T1cUTdK1PDd93/VVr8B8=\n"
	if got != (result{stdout: want}) {
		t.Errorf("a form body: %+v; want exit 0 and\n%s", got, want)
	}
	got = execute(t, "", "sign", "--scheme", "twilio", "--url", twilioURL+"&bodySHA256="+twilioJSONHash, "--id", "idem-2", twilioJSON)
	want = "I-Twilio-Idempotency-Token: idem-2\nX-Twilio-Signature: a9nBmqA0ju/hNViExpshrM61xv4=\n"
	if got != (result{stdout: want}) {
		t.Errorf("a JSON body with bodySHA256: %+v; want exit 0 and\n%s", got, want)
	}
	for _, tc := range []struct {
		args   []string
		stderr string
	}{
		{[]string{twilioCall}, "Error: scheme twilio signs the URL it is sent to: pass --url or --send\n"},
		{[]string{"--url", twilioURL, twilioJSON}, "add bodySHA256=" + twilioJSONHash + " to the URL's query\n"},
		{[]string{"--url", twilioURL + "&bodySHA256=00", twilioJSON}, "Error: the URL's bodySHA256 is not the body's SHA-256 (" + twilioJSONHash + ")\n"},
	} {
		res := execute(t, "", append([]string{"sign", "--scheme", "twilio"}, tc.args...)...)
		if res.code != 1 || res.stdout != "" || !strings.HasSuffix(res.stderr, tc.stderr) {
			t.Errorf("sign %q: %+v; want exit 1, stderr ending %q", tc.args, res, tc.stderr)
		}
	}
}

// TestSignTwilioSend: with --send, the URL signed is --send's, the form
// type is sent, and a twilio verifier at that URL accepts the request.
func TestSignTwilioSend(t *testing.T) {
	t.Setenv("HOOKGATE_SECRET", "")
	v, err := verify.New("twilio", []string{"twilio-token"}, verify.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var gotType, gotID string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		gotType = r.Header.Get("Content-Type")
		mu.Unlock()
		d, err := v.Verify(verify.Request{Method: r.Method, URL: "http://" + r.Host + r.URL.RequestURI(), Header: r.Header, Body: body}, time.Now())
		if err != nil {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		mu.Lock()
		gotID = d.ID
		mu.Unlock()
	}))
	defer srv.Close()

	received := func() (contentType, id string) {
		mu.Lock()
		defer mu.Unlock()
		return gotType, gotID
	}

	res := execute(t, "", "sign", "--scheme", "twilio", "--secret", "twilio-token", "--id", "idem-send", "--send", srv.URL+"/sms?tenant=a", "Body=hi&From=%2B15005550006")
	if ct, id := received(); res.code != 0 || !strings.HasPrefix(res.stdout, "HTTP/1.1 200 OK\n") || ct != "application/x-www-form-urlencoded" || id != "idem-send" {
		t.Errorf("sign --send: %+v, Content-Type %q, ID %q", res, ct, id)
	}
	res = execute(t, "", "sign", "--scheme", "twilio", "--secret", "twilio-token", "--url", "https://elsewhere.example/sms?tenant=a", "--send", srv.URL+"/sms?tenant=a", "Body=hi")
	if res.code != 1 || !strings.HasPrefix(res.stdout, "HTTP/1.1 401 Unauthorized\n") {
		t.Errorf("signed for another URL than the one sent to: %+v; want the verifier's 401", res)
	}
}
