package verify

import (
	"bytes"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// checkFetchedErr is checkErr for the schemes that fetch their keys,
// whose bodies are read too: only documented errors may come out.
func checkFetchedErr(t *testing.T, err error) {
	t.Helper()
	for _, known := range []error{ErrMalformedBody, ErrKeyUnavailable, ErrTopicNotAllowed, ErrCertURLNotAllowed} {
		if errors.Is(err, known) {
			return
		}
	}
	checkErr(t, err)
}

// FuzzSNS verifies arbitrary bodies and headers under scheme sns, with
// the vectors' certificate at their SigningCertURL: only documented
// errors come out, and only a genuine message verifies: its signed
// string and signature are a vector's.
func FuzzSNS(f *testing.F) {
	cert := string(readTestdata(f, "sns/SimpleNotificationService-7506a1e35b36ef5a444dd1a8e7cc3ed8.pem"))
	var genuine []*snsMessage
	for _, name := range []string{"sns-v1.json", "sns-v2.json", "sns-subscription-confirmation.json"} {
		body := readTestdata(f, "sns/"+name)
		m, err := readSNS(body)
		if err != nil {
			f.Fatal(err)
		}
		genuine = append(genuine, m)
		f.Add(body, m.Type)
	}
	f.Add([]byte(`{"Type":"Notification","Type":"x"}`), "")
	f.Add([]byte(`{"Type":"Notification","MessageId":"1","TopicArn":"`+snsTopic+`","Timestamp":"2026-03-06T20:00:26.893Z","SignatureVersion":"2","Signature":"AA==","SigningCertURL":"https://sns.us-west-2.amazonaws.com/x.pem","Subject":null}`), "Notification")
	f.Add([]byte(`[1,{"a":"b"}]`), "")
	_, client := newStand(map[string]string{snsCertURL: cert})
	v := newSNSVerifierF(f, SNS{Topics: []string{snsTopic}}, client)
	at := time.Date(2026, 3, 6, 20, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, body []byte, typ string) {
		h := http.Header{}
		if typ != "" {
			h.Set("X-Amz-Sns-Message-Type", typ)
		}
		d, err := v.Verify(Request{Header: h, Body: body}, at)
		checkFetchedErr(t, err)
		if err != nil {
			return
		}
		m, _ := readSNS(body)
		for _, g := range genuine {
			if bytes.Equal(m.canonical(), g.canonical()) && m.Signature == g.Signature && d.ID == g.MessageID {
				return
			}
		}
		t.Fatalf("verified a message that is no vector's: %q", body)
	})
}

// FuzzPubSub verifies arbitrary Authorization headers and bodies under
// scheme pubsub, with Google's JWKS: only documented errors come out, and
// only Google's token verifies.
func FuzzPubSub(f *testing.F) {
	tok := strings.TrimSpace(string(readTestdata(f, "pubsub/pubsub-token.txt")))
	_, client := newStand(map[string]string{googleJWKS: string(readTestdata(f, "pubsub/pubsub-jwks.json"))})
	v, err := New("pubsub", nil, Options{Client: client, PubSub: &PubSub{Audience: googleTokenAudience, ServiceAccounts: []string{googleTokenAccount}}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add("Bearer "+tok, []byte(pushBody))
	f.Add("bearer "+tok, []byte(`{"message":{"message_id":"1"}}`))
	f.Add("Bearer "+tok+".x", []byte(`{}`))
	f.Add("Bearer e30.e30.", []byte(pushBody))
	f.Add("Bearer eyJhbGciOiJub25lIn0.e30.", []byte(pushBody))
	sig := tok[strings.LastIndexByte(tok, '.')+1:]
	at := googleTokenIssued.Add(time.Minute)
	f.Fuzz(func(t *testing.T, auth string, body []byte) {
		_, err := v.Verify(Request{Header: http.Header{"Authorization": {auth}}, Body: body}, at)
		checkFetchedErr(t, err)
		if err == nil && !strings.HasSuffix(auth, "."+sig) {
			t.Fatalf("verified a token that is not Google's: %q", auth)
		}
	})
}

func newSNSVerifierF(f *testing.F, cfg SNS, client *http.Client) *Verifier {
	f.Helper()
	v, err := New("sns", nil, Options{SNS: &cfg, Client: client})
	if err != nil {
		f.Fatal(err)
	}
	return v
}
