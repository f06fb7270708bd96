package verify

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fuzzProvider verifies arbitrary headers of scheme (the verifier holds
// the vector's secret, so a seed can reach the MAC and succeed): only
// documented errors may come out. Then what the scheme signs over body
// verifies, and over a longer body does not.
func fuzzProvider(t *testing.T, v *Verifier, h http.Header, body []byte, now time.Time) {
	t.Helper()
	_, err := v.Verify(Request{Header: h, Body: body}, now)
	checkErr(t, err)
	signed := v.Sign("", now, body)
	if _, err := v.Verify(Request{Header: signed, Body: body}, now); err != nil {
		t.Fatalf("own signature rejected: %v", err)
	}
	if _, err := v.Verify(Request{Header: signed, Body: append(body, 'x')}, now); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("a longer body: err = %v, want ErrBadSignature", err)
	}
}

func FuzzZoom(f *testing.F) {
	f.Add("v0=8f56a4719b75f690a4e349fd0910bdfeaf770f5138cd81edad8b1ebbfbc57710", "1635885799", []byte(zoomVectorBody))
	f.Add("v0=", "", []byte(nil))
	f.Add("v0=zz", "+1635885799", []byte(`{}`))
	f.Add("sha256=00", "99999999999999999999", []byte(`{"event":"endpoint.url_validation"}`))
	v, err := New("zoom", []string{"another secret", "zoom-secret-token-ZmQ4"}, Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, sig, ts string, body []byte) {
		h := http.Header{}
		h.Set("X-Zm-Signature", sig)
		h.Set("X-Zm-Request-Timestamp", ts)
		now := t0
		if n, err := strconv.ParseInt(ts, 10, 64); err == nil && n > 0 && n < 1<<40 {
			now = time.Unix(n, 0) // in the window: the signature decides
		}
		fuzzProvider(t, v, h, body, now)
	})
}

func FuzzMeta(f *testing.F) {
	f.Add("sha256=46214fad10591739789cd5e1adfc1a22f1b754fcfda19fbe0c56b225d7d879fe", []byte(metaVectorBody))
	f.Add("sha256=", []byte(nil))
	f.Add("sha1=00", []byte(`{}`))
	f.Add("sha256=0", []byte(`{"object":"page"}`))
	v, err := New("meta", []string{"another secret", "meta-app-secret-7f3a"}, Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, sig string, body []byte) {
		h := http.Header{}
		h.Set("X-Hub-Signature-256", sig)
		fuzzProvider(t, v, h, body, t0)
	})
}

func FuzzTwitter(f *testing.F) {
	f.Add("sha256=25Cu3iwbbiqBTwQRzcKJZwisjf736V2Q8UaTlkfLSoc=", []byte("test=1&other_test=2"))
	f.Add("sha256=YWHphPn/JFq43jkF0y4/w8R/SelmLjvpunhVFY8JhlI=", []byte(`{"test_number":1,"test_string":"two"}`))
	f.Add("sha256=", []byte(nil))
	f.Add("sha256=25Cu3iwbbiqBTwQRzcKJZwisjf736V2Q8UaTlkfLSoc", []byte(`{}`))
	v, err := New("twitter", []string{"another secret", "test"}, Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, sig string, body []byte) {
		h := http.Header{}
		h.Set("X-Twitter-Webhooks-Signature", sig)
		if !jsonObject(body) {
			// Never accepted, however signed: a CRC answer could sign it.
			_, err := v.Verify(Request{Header: h, Body: body}, t0)
			checkErr(t, err)
			if _, err := v.Verify(Request{Header: v.Sign("", t0, body), Body: body}, t0); !errors.Is(err, ErrBadSignature) {
				t.Fatalf("a body that is not a JSON object, signed: err = %v, want ErrBadSignature", err)
			}
			return
		}
		fuzzProvider(t, v, h, body, t0)
	})
}

// FuzzPublicKeySchemes: discord's, sendgrid's and telnyx's headers, whatever they
// hold, give only documented errors, and what each signs verifies.
func FuzzPublicKeySchemes(f *testing.F) {
	f.Add(uint8(0), "00", "1700000000", []byte(`{"id":"1","type":1}`))
	f.Add(uint8(0), strings.Repeat("ab", 64), "+1700000000", []byte(nil))
	f.Add(uint8(1), "MEUCIQ==", "1700000000", []byte(`[{"sg_event_id":"e"}]`))
	f.Add(uint8(1), "", "", []byte(`[]`))
	f.Add(uint8(2), "AAAA", "1700000000", []byte(`{"data":{"id":"x"}}`))
	verifiers := make([]*Verifier, 3)
	for i, sc := range []struct{ scheme, key string }{{"discord", testEd25519Key1}, {"sendgrid", testP256Key1}, {"telnyx", testEd25519Key2}} {
		v, err := New(sc.scheme, []string{sc.key}, Options{})
		if err != nil {
			f.Fatal(err)
		}
		verifiers[i] = v
	}
	f.Fuzz(func(t *testing.T, n uint8, sig, ts string, body []byte) {
		h := http.Header{}
		names := [][2]string{{discord.sigHeader, discord.tsHeader}, {sendgridSignature, sendgridTimestamp}, {telnyx.sigHeader, telnyx.tsHeader}}[n%3]
		h.Set(names[0], sig)
		h.Set(names[1], ts)
		fuzzProvider(t, verifiers[n%3], h, body, t0)
	})
}

// FuzzTokenSchemes: whatever header and body the token schemes get, only
// documented errors come out, and a wrong token never verifies.
func FuzzTokenSchemes(f *testing.F) {
	f.Add(uint8(0), "tok", []byte(`{}`))
	f.Add(uint8(1), "Basic aG9va3M6cGE1NXdvcmQ=", []byte(`{}`))
	f.Add(uint8(3), "", []byte(`{"passcode":"tok"}`))
	f.Add(uint8(4), "", []byte(`{"value":[{"clientState":"tok"},{"clientState":["tok"]}]}`))
	names := []string{"gitlab", "postmark", "okta", "figma", "msgraph"}
	verifiers := make([]*Verifier, len(names))
	for i, n := range names {
		v, err := New(n, []string{"tok", "hooks:pa55word"}, Options{})
		if err != nil {
			f.Fatal(err)
		}
		verifiers[i] = v
	}
	f.Fuzz(func(t *testing.T, n uint8, header string, body []byte) {
		v := verifiers[int(n)%len(verifiers)]
		h := http.Header{}
		h.Set("X-Gitlab-Token", header)
		h.Set("Authorization", header)
		_, err := v.Verify(Request{Header: h, Body: body}, t0)
		checkErr(t, err)
		if err == nil && !strings.Contains(header+string(body), "tok") && !strings.Contains(header, "aG9va3M6cGE1NXdvcmQ") {
			t.Fatalf("%s verified %q %q, which holds no secret", names[int(n)%len(names)], header, body)
		}
	})
}
