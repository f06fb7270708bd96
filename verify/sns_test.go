package verify

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// snsCertURL is the SigningCertURL of the vectors in testdata/sns.
const snsCertURL = "https://sns.us-west-2.amazonaws.com/SimpleNotificationService-7506a1e35b36ef5a444dd1a8e7cc3ed8.pem"

// snsTopic is the vectors' topic.
const snsTopic = "arn:aws:sns:us-west-2:131990247566:dongie-standard-topic"

// stand is a stand-in for the hosts a scheme fetches from: it answers
// the URLs it holds, 404 to the rest, and counts the requests.
type stand struct {
	mu    sync.Mutex
	pages map[string]string
	got   map[string]int
}

func (s *stand) RoundTrip(r *http.Request) (*http.Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got[r.URL.String()]++
	page, ok := s.pages[r.URL.String()]
	status := http.StatusOK
	if !ok {
		status = http.StatusNotFound
	}
	return &http.Response{StatusCode: status, Status: http.StatusText(status), Header: make(http.Header),
		Body: io.NopCloser(strings.NewReader(page)), Request: r}, nil
}

func (s *stand) count(url string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.got[url]
}

func newStand(pages map[string]string) (*stand, *http.Client) {
	s := &stand{pages: pages, got: make(map[string]int)}
	return s, &http.Client{Transport: s}
}

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// snsAt is when message body was published.
func snsAt(t *testing.T, body []byte) time.Time {
	t.Helper()
	var m struct{ Timestamp string }
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	ts, err := time.Parse(time.RFC3339Nano, m.Timestamp)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func newSNSVerifier(t *testing.T, cfg SNS, client *http.Client) *Verifier {
	t.Helper()
	v, err := New("sns", nil, Options{SNS: &cfg, Client: client})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestSNSVectors verifies genuine SNS deliveries (aws-sdk-java-v2's
// tests; testdata/sns/SOURCES.md) of both signature versions, with and
// without a Subject, and both confirmations; a changed field, another
// topic and a stale timestamp are refused.
func TestSNSVectors(t *testing.T) {
	cert := string(readTestdata(t, "sns/SimpleNotificationService-7506a1e35b36ef5a444dd1a8e7cc3ed8.pem"))
	for _, name := range []string{"sns-v1.json", "sns-v1-nosubject.json", "sns-v2.json", "sns-subscription-confirmation.json", "sns-unsubscribe-confirmation.json"} {
		t.Run(name, func(t *testing.T) {
			body := readTestdata(t, "sns/"+name)
			at := snsAt(t, body)
			stand, client := newStand(map[string]string{snsCertURL: cert})
			v := newSNSVerifier(t, SNS{Topics: []string{snsTopic}}, client)
			var m map[string]any
			_ = json.Unmarshal(body, &m)
			h := http.Header{"X-Amz-Sns-Message-Type": {m["Type"].(string)}, "X-Amz-Sns-Message-Id": {m["MessageId"].(string)}}
			d, err := v.Verify(Request{Header: h, Body: body}, at.Add(time.Minute))
			if err != nil {
				t.Fatalf("genuine: %v", err)
			}
			if d.ID != m["MessageId"] || d.Key != KeyID || d.Scheme != "sns" || !d.Timestamp.Equal(at.Truncate(time.Second)) {
				t.Fatalf("delivery = %+v", d)
			}
			changed := bytes.Replace(body, []byte(`"Message" : "`), []byte(`"Message" : "X`), 1)
			if _, err := v.Verify(Request{Header: h, Body: changed}, at); !errors.Is(err, ErrBadSignature) {
				t.Fatalf("changed Message: %v, want %v", err, ErrBadSignature)
			}
			if _, err := v.Verify(Request{Header: h, Body: body}, at.Add(DefaultTolerance+time.Second)); !errors.Is(err, ErrTimestampOutOfTolerance) {
				t.Fatalf("stale: %v", err)
			}
			other := newSNSVerifier(t, SNS{Topics: []string{snsTopic + "-other"}}, client)
			if _, err := other.Verify(Request{Header: h, Body: body}, at); !errors.Is(err, ErrTopicNotAllowed) {
				t.Fatalf("another topic: %v", err)
			}
			h.Set("X-Amz-Sns-Message-Id", "forged")
			if _, err := v.Verify(Request{Header: h, Body: body}, at); !errors.Is(err, ErrMalformedHeader) {
				t.Fatalf("a header that differs from the message: %v", err)
			}
			if n := stand.count(snsCertURL); n != 1 {
				t.Fatalf("the certificate was fetched %d times, want once (cached)", n)
			}
		})
	}
}

// TestSNSCertURLs holds SigningCertURL to https, an SNS host and a .pem
// path: a message naming any other is refused before anything is fetched.
func TestSNSCertURLs(t *testing.T) {
	body := readTestdata(t, "sns/sns-v2.json")
	at := snsAt(t, body)
	for _, u := range []string{
		"http://sns.us-west-2.amazonaws.com/cert.pem",
		"https://sns.s3.amazonaws.com/cert.pem", // an S3 bucket named sns
		"https://sns.us-west-2.amazonaws.com.evil.example/cert.pem",
		"https://evil.example/sns.us-west-2.amazonaws.com/cert.pem",
		"https://sns.us-west-2.amazonaws.com/cert.pem?x=1",
		"https://sns.us-west-2.amazonaws.com/cert.txt",
		"https://user@sns.us-west-2.amazonaws.com/cert.pem",
		"https://sns.us-west-2.amazonaws.com:8443/cert.pem",
		"https://[::1]/cert.pem",
		"https://sns.us-west-2.amazonaws.com/random.pem", // not one of SNS's certificates
		"file:///etc/passwd.pem",
	} {
		stand, client := newStand(nil)
		v := newSNSVerifier(t, SNS{Topics: []string{snsTopic}}, client)
		forged := bytes.Replace(body, []byte(snsCertURL), []byte(u), 1)
		if _, err := v.Verify(Request{Body: forged}, at); !errors.Is(err, ErrCertURLNotAllowed) {
			t.Errorf("%s: %v, want %v", u, err, ErrCertURLNotAllowed)
		}
		if len(stand.got) != 0 {
			t.Errorf("%s: fetched %v", u, stand.got)
		}
	}
	// cert_hosts replaces SNS's hosts: a glob's * is one label, a port is
	// named.
	s := &sns{cfg: SNS{CertHosts: []string{"sns.*.example.com", "localhost:8443"}}}
	for u, want := range map[string]bool{
		"https://sns.eu.example.com/c.pem":      true,
		"https://sns.a.b.example.com/c.pem":     false,
		"https://sns.eu.example.com:444/c.pem":  false,
		"https://localhost:8443/c.pem":          true,
		"https://localhost/c.pem":               false,
		"https://sns.us-east-1.amazonaws.com/c": false,
	} {
		if got := s.allowed(u, true) == nil; got != want {
			t.Errorf("cert_hosts: %s allowed = %v, want %v", u, got, want)
		}
	}
}

// TestSNSFetchFailures: a certificate that cannot be fetched is 503
// key_unavailable, never an accept; a failure is tried again after a
// minute, not at every request.
func TestSNSFetchFailures(t *testing.T) {
	body := readTestdata(t, "sns/sns-v2.json")
	at := snsAt(t, body)
	for name, page := range map[string]string{"404": "", "not a certificate": "hello", "too big": strings.Repeat("A", fetchMaxBytes+1)} {
		pages := map[string]string{snsCertURL: page}
		if name == "404" {
			pages = nil
		}
		stand, client := newStand(pages)
		v := newSNSVerifier(t, SNS{Topics: []string{snsTopic}}, client)
		for i := range 3 {
			_, err := v.Verify(Request{Body: body}, at.Add(time.Duration(i)*time.Second))
			if !errors.Is(err, ErrKeyUnavailable) {
				t.Fatalf("%s: %v, want %v", name, err, ErrKeyUnavailable)
			}
			if reason, _ := Rejection(err); reason.Status != http.StatusServiceUnavailable || reason.Code != "key_unavailable" {
				t.Fatalf("%s: rejected %v", name, reason)
			}
		}
		if n := stand.count(snsCertURL); n != 1 {
			t.Fatalf("%s: fetched %d times in 3 s, want once", name, n)
		}
		_, _ = v.Verify(Request{Body: body}, at.Add(fetchFailureTTL+time.Second))
		if n := stand.count(snsCertURL); n != 2 {
			t.Fatalf("%s: fetched %d times after a minute, want twice", name, n)
		}
	}
}

// TestSNSMalformed refuses bodies that are not one SNS message.
func TestSNSMalformed(t *testing.T) {
	body := readTestdata(t, "sns/sns-v2.json")
	at := snsAt(t, body)
	_, client := newStand(nil)
	v := newSNSVerifier(t, SNS{Topics: []string{snsTopic}}, client)
	for name, b := range map[string]string{
		"not JSON":          "hello",
		"an array":          "[]",
		"two values":        string(body) + "{}",
		"a key twice":       strings.Replace(string(body), `"Type" : "Notification",`, `"Message":"forged","Type" : "Notification",`, 1),
		"another type":      strings.Replace(string(body), `"Notification"`, `"Other"`, 1),
		"no Signature":      strings.Replace(string(body), `"Signature"`, `"Sig"`, 1),
		"SignatureVersion3": strings.Replace(string(body), `"SignatureVersion" : "2"`, `"SignatureVersion" : "3"`, 1),
		"a bad Timestamp":   strings.Replace(string(body), `2026-03-06T20:00:26.893Z`, `yesterday`, 1),
		// Review: what a decoder that folds names, or drops what is not
		// a string, would read otherwise than the signature does.
		"another case":         strings.Replace(string(body), `"Type" : "Notification",`, `"Type" : "Notification","message":"EVIL",`, 1),
		"a Unicode folding":    strings.Replace(string(body), `"Type" : "Notification",`, `"Type" : "Notification","Meſſage":"EVIL",`, 1),
		"a TopicArn spelling":  strings.Replace(string(body), `"Type" : "Notification",`, `"Type" : "Notification","TopicARN":"arn:aws:sns:x:1:evil",`, 1),
		"a Subject not string": strings.Replace(string(body), `"Type" : "Notification",`, `"Type" : "Notification","Subject":["EVIL"],`, 1),
		"trailing brace":       string(body) + "}",
		"trailing garbage":     string(body) + ` ,"Message":"EVIL"}`,
		"invalid UTF-8":        strings.Replace(string(body), `signature version 2.`, "signature version 2.\xff", 1),
	} {
		if _, err := v.Verify(Request{Body: []byte(b)}, at); !errors.Is(err, ErrMalformedBody) {
			t.Errorf("%s: %v, want %v", name, err, ErrMalformedBody)
		}
	}
}

// testSNSKey is an RSA key and a certificate of it, as SNS's own.
func testSNSKey(t testing.TB) (keyPEM, certPEM string) {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sns.amazonaws.com"},
		NotBefore: time.Unix(0, 0), NotAfter: time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	p8, _ := x509.MarshalPKCS8PrivateKey(k)
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: p8})),
		string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// TestSNSSignAndConfirm signs messages as SNS does (hookgate sign) and
// verifies them; a SubscriptionConfirmation is confirmed by a GET of its
// SubscribeURL only with confirm_subscriptions, for a listed topic.
func TestSNSSignAndConfirm(t *testing.T) {
	keyPEM, certPEM := testSNSKey(t)
	certURL := "https://sns.eu-west-1.amazonaws.com/SimpleNotificationService-0123456789abcdef0123456789abcdef.pem"
	subscribe := "https://sns.eu-west-1.amazonaws.com/?Action=ConfirmSubscription&TopicArn=" + snsTopic + "&Token=t"
	signer, err := NewSigner("sns", keyPEM, certURL)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	msg := `{"Type":"SubscriptionConfirmation","TopicArn":"` + snsTopic + `","Message":"confirm","Token":"t","SubscribeURL":"` + subscribe + `"}`
	h, body, err := signer.SignMessage(Request{Body: []byte(msg)}, "m-1", now)
	if err != nil {
		t.Fatal(err)
	}
	if h.Get("X-Amz-Sns-Message-Type") != "SubscriptionConfirmation" || h.Get("X-Amz-Sns-Message-Id") != "m-1" {
		t.Fatalf("headers = %v", h)
	}
	stand, client := newStand(map[string]string{certURL: certPEM, subscribe: "<ConfirmSubscriptionResponse/>"})
	r := Request{Method: http.MethodPost, Header: h, Body: body}

	off := newSNSVerifier(t, SNS{Topics: []string{snsTopic}}, client)
	if _, ok := off.Handshake(r, now); ok {
		t.Fatal("confirmed without confirm_subscriptions")
	}
	if d, err := off.Verify(r, now); err != nil || d.ID != "m-1" {
		t.Fatalf("without confirm_subscriptions, the confirmation passes on verified: %+v %v", d, err)
	}

	on := newSNSVerifier(t, SNS{Topics: []string{snsTopic}, ConfirmSubscriptions: true}, client)
	a, ok := on.Handshake(r, now)
	if !ok || a.Status != http.StatusOK || a.Reason.Code != "" || stand.count(subscribe) != 1 {
		t.Fatalf("confirm: %+v %v, SubscribeURL fetched %d times", a, ok, stand.count(subscribe))
	}
	forged := Request{Method: http.MethodPost, Header: h, Body: bytes.Replace(body, []byte(`"confirm"`), []byte(`"forged"`), 1)}
	if a, ok := on.Handshake(forged, now); !ok || a.Reason.Code != "bad_signature" || stand.count(subscribe) != 1 {
		t.Fatalf("a forged confirmation: %+v, SubscribeURL fetched %d times", a, stand.count(subscribe))
	}
	unlisted := newSNSVerifier(t, SNS{Topics: []string{snsTopic + "-other"}, ConfirmSubscriptions: true}, client)
	if a, ok := unlisted.Handshake(r, now); !ok || a.Reason.Code != "topic_not_allowed" || stand.count(subscribe) != 1 {
		t.Fatalf("an unlisted topic: %+v", a)
	}
	delete(stand.pages, subscribe)
	if a, _ := on.Handshake(r, now); a.Reason.Code != "subscription_not_confirmed" || a.Reason.Status != http.StatusBadGateway {
		t.Fatalf("a SubscribeURL that fails: %+v", a)
	}

	// A notification, signed with version 1 as asked.
	h, body, err = signer.SignMessage(Request{Body: []byte(`{"TopicArn":"` + snsTopic + `","Message":"hi","Subject":"s","SignatureVersion":"1"}`)}, "m-2", now)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := off.Verify(Request{Header: h, Body: body}, now); err != nil || d.ID != "m-2" {
		t.Fatalf("signed notification: %+v %v", d, err)
	}
}

// TestSNSConfig refuses what scheme sns cannot use.
func TestSNSConfig(t *testing.T) {
	for name, opts := range map[string]Options{
		"no topics":        {SNS: &SNS{}},
		"no configuration": {},
		"not an ARN":       {SNS: &SNS{Topics: []string{"orders"}}},
		"a URL cert host":  {SNS: &SNS{Topics: []string{snsTopic}, CertHosts: []string{"https://x/"}}},
	} {
		if _, err := New("sns", nil, opts); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := New("sns", []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}, Options{SNS: &SNS{Topics: []string{snsTopic}}}); err == nil {
		t.Error("an HMAC secret accepted")
	}
	if _, err := New("github", []string{"s"}, Options{SNS: &SNS{Topics: []string{snsTopic}}}); err == nil {
		t.Error("topics accepted for github")
	}
	if _, err := NewSigner("sns", "k", ""); err == nil {
		t.Error("a signer without a certificate URL")
	}
}
