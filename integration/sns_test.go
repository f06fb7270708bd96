package integration

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookgate/hookgate/verify"
)

// keyHost is a local stand-in for a provider's key host (SNS's
// certificates, Google's JWKS): HTTPS under a test CA that the gateway
// trusts through SSL_CERT_FILE (its only trust root), serving the pages
// it holds, and counting what it is asked.
type keyHost struct {
	*httptest.Server
	mu       sync.Mutex
	pages    map[string]string // path -> body
	got      map[string]int    // path -> requests
	rootFile string            // the PEM of the test CA, for SSL_CERT_FILE
}

func newKeyHost(t *testing.T, pages map[string]string) *keyHost {
	t.Helper()
	s := &keyHost{pages: pages, got: map[string]int{}}
	s.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.got[r.URL.Path]++
		page, ok := s.pages[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(page))
	}))
	t.Cleanup(s.Close)
	s.rootFile = filepath.Join(t.TempDir(), "root.pem")
	root := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw})
	if err := os.WriteFile(s.rootFile, root, 0o600); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *keyHost) count(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.got[path]
}

// snsKey is an RSA key in PKCS#8 PEM and a certificate of it, as SNS's.
func snsKey(t *testing.T) (keyPEM, certPEM string) {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "sns.amazonaws.com"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	return pkcs8PEM(t, k), string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// TestSNSThroughTheBinary runs scheme sns in a gateway whose only trust
// root is a test CA, with a stand-in for SNS's host: a notification
// signed by hookgate sign is forwarded once and its duplicate replayed; a
// listed topic's SubscriptionConfirmation is confirmed (a GET of its
// SubscribeURL) and never forwarded; a forged message, another topic, a
// certificate on another host and a certificate host that is down are
// refused, each with its reason.
func TestSNSThroughTheBinary(t *testing.T) {
	const topic = "arn:aws:sns:eu-west-1:123456789012:enrollments"
	keyPEM, certPEM := snsKey(t)
	aws := newKeyHost(t, map[string]string{"/SimpleNotificationService-test.pem": certPEM, "/": "<ConfirmSubscriptionResponse/>"})
	certURL := aws.URL + "/SimpleNotificationService-test.pem"
	up := newUpstream(t, nil)
	site := fmt.Sprintf(`
	handle /sns {
		webhook_verify sns {
			topics %s
			cert_hosts %s
			confirm_subscriptions
		}
		webhook_dedupe
		reverse_proxy %s
	}`, topic, strings.TrimPrefix(aws.URL, "https://"), up.Addr())
	g := startGateway(t, site, gatewayOptions{Env: []string{"SSL_CERT_FILE=" + aws.rootFile}})

	// hookgate sign signs and sends a notification, twice.
	note := `{"Type":"Notification","TopicArn":"` + topic + `","Subject":"enrolled","Message":"{\"learner\":\"l-1\"}"}`
	stamp := fmt.Sprint(time.Now().Unix()) // SNS's retry is the same message, byte for byte
	for i := range 2 {
		out, err := exec.Command(binary, "sign", "--scheme", "sns", "--secret", keyPEM, "--key-id", certURL,
			"--id", "sns-msg-1", "--timestamp", stamp, "--send", g.URL+"/sns", note).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "200 OK") || (i == 1) != strings.Contains(string(out), "Idempotent-Replayed: true") {
			t.Fatalf("hookgate sign --send, %d: %v\n%s", i+1, err, out)
		}
	}
	if rs := up.received(); len(rs) != 1 || rs[0].Header.Get("X-Amz-Sns-Message-Id") != "sns-msg-1" || !bytes.Contains(rs[0].Body, []byte(`"Signature"`)) {
		t.Fatalf("the upstream got %d requests, want the signed message once", len(rs))
	}
	if n := aws.count("/SimpleNotificationService-test.pem"); n != 1 {
		t.Fatalf("the certificate was fetched %d times, want once", n)
	}

	signer, err := verify.NewSigner("sns", keyPEM, certURL)
	if err != nil {
		t.Fatal(err)
	}
	sign := func(msg string, id string) (http.Header, []byte) {
		h, body, err := signer.SignMessage(verify.Request{Body: []byte(msg)}, id, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return h, body
	}
	confirm := `{"Type":"SubscriptionConfirmation","TopicArn":"` + topic + `","Message":"confirm","Token":"tok","SubscribeURL":"` +
		aws.URL + `/?Action=ConfirmSubscription&TopicArn=` + topic + `&Token=tok"}`
	h, body := sign(confirm, "sns-confirm-1")
	status, _, got := post(t, g.URL+"/sns", h, body)
	if status != 200 || !strings.Contains(string(got), "confirmed") || aws.count("/") != 1 {
		t.Fatalf("the confirmation: %d %s, SubscribeURL fetched %d times", status, got, aws.count("/"))
	}
	if n := up.count(); n != 1 {
		t.Fatalf("the confirmation was forwarded: the upstream has %d requests", n)
	}

	for _, tt := range []struct {
		name   string
		msg    func() (http.Header, []byte)
		status int
		reason string
	}{
		{"forged", func() (http.Header, []byte) {
			h, body := sign(note, "sns-msg-2")
			return h, bytes.Replace(body, []byte("l-1"), []byte("l-2"), 1)
		}, 401, "bad_signature"},
		{"another topic", func() (http.Header, []byte) {
			return sign(strings.ReplaceAll(note, topic, topic+"-other"), "sns-msg-3")
		}, 403, "topic_not_allowed"},
		{"a certificate on another host", func() (http.Header, []byte) {
			h, body := sign(note, "sns-msg-4")
			return h, bytes.ReplaceAll(body, []byte(strings.TrimPrefix(aws.URL, "https://")), []byte("sns.eu-west-1.amazonaws.com.evil.example"))
		}, 403, "cert_url_not_allowed"},
		{"a certificate that is not there", func() (http.Header, []byte) {
			other, _ := verify.NewSigner("sns", keyPEM, aws.URL+"/gone.pem")
			h, body, _ := other.SignMessage(verify.Request{Body: []byte(note)}, "sns-msg-5", time.Now())
			return h, body
		}, 503, "key_unavailable"},
	} {
		h, body := tt.msg()
		status, rh, got := post(t, g.URL+"/sns", h, body)
		if status != tt.status || problemBody(t, status, rh, got) != tt.reason {
			t.Errorf("%s: %d %s, want %d %s", tt.name, status, got, tt.status, tt.reason)
		}
	}
	if n := up.count(); n != 1 {
		t.Fatalf("a refused message was forwarded: the upstream has %d requests", n)
	}

	// hookgate sign without --send prints the headers, then the signed body.
	out, err := exec.Command(binary, "sign", "--scheme", "sns", "--secret", keyPEM, "--key-id", certURL, "--id", "m-9", note).Output()
	if err != nil {
		t.Fatal(err)
	}
	head, signed, ok := strings.Cut(string(out), "\n\n")
	var m map[string]string
	if !ok || !strings.Contains(head, "X-Amz-Sns-Message-Id: m-9") || json.Unmarshal([]byte(signed), &m) != nil || m["Signature"] == "" || m["SigningCertURL"] != certURL {
		t.Fatalf("hookgate sign --scheme sns printed:\n%s", out)
	}
}
