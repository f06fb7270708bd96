package verify

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
)

// FuzzMailgun verifies arbitrary bodies, of any Content-Type, under
// mailgun-php's key: only documented errors come out; only the vector's
// timestamp, token and signature (its hex in any case) verify, with the
// token as the ID; and
// what verifies is what the service behind reads: encoding/json (the last
// of duplicate keys) or net/http's form parsing find the same signed
// fields.
func FuzzMailgun(f *testing.F) {
	f.Add("application/json", mailgunJSONBody(mailgunTimestamp, mailgunToken, mailgunSignature))
	f.Add("application/x-www-form-urlencoded", mailgunFormBody(mailgunTimestamp, mailgunToken, mailgunSignature))
	f.Add("multipart/form-data; boundary=b", []byte("--b\r\nContent-Disposition: form-data; name=\"timestamp\"\r\n\r\n"+mailgunTimestamp+
		"\r\n--b\r\nContent-Disposition: form-data; name=\"token\"\r\n\r\n"+mailgunToken+
		"\r\n--b\r\nContent-Disposition: form-data; name=\"signature\"\r\n\r\n"+mailgunSignature+"\r\n--b--\r\n"))
	f.Add("application/json", []byte(`{"signature":{"timestamp":"1403645220","token":"x","token":"`+mailgunToken+`","signature":"`+mailgunSignature+`"}}`))
	f.Add("application/x-www-form-urlencoded", append(mailgunFormBody(mailgunTimestamp, mailgunToken, mailgunSignature), "&token=x"...))
	v, err := New("mailgun", []string{mailgunKey}, Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, contentType string, body []byte) {
		h := http.Header{"Content-Type": {contentType}}
		d, err := v.Verify(Request{Header: h, Body: body}, mailgunAt)
		if err != nil {
			if !errors.Is(err, ErrMalformedBody) {
				checkErr(t, err)
			}
			return
		}
		if d.ID != mailgunToken {
			t.Fatalf("verified token %q, not the vector's", d.ID)
		}
		got := serviceReads(t, contentType, body)
		want := map[string]string{"timestamp": mailgunTimestamp, "token": mailgunToken, "signature": mailgunSignature}
		for k, w := range want {
			// hex in either case decodes to the one signature, as
			// Mailgun's SDKs decode it.
			if got[k] != w && (k != "signature" || !strings.EqualFold(got[k], w)) {
				t.Fatalf("verified, yet the service behind reads %s %q, not the signed %q: %q", k, got[k], w, body)
			}
		}
	})
}

// serviceReads is what a service behind reads of body's signature fields,
// by the standard library's parsers.
func serviceReads(t *testing.T, contentType string, body []byte) map[string]string {
	t.Helper()
	r, err := http.NewRequest(http.MethodPost, "http://svc/", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Content-Type", contentType)
	if json.Valid(body) {
		var m struct {
			Signature struct{ Timestamp, Token, Signature string }
		}
		_ = json.Unmarshal(body, &m) // as a Go service would, keys in any case
		return map[string]string{"timestamp": m.Signature.Timestamp, "token": m.Signature.Token, "signature": m.Signature.Signature}
	}
	got := map[string]string{}
	if err := r.ParseMultipartForm(1 << 20); err != nil && !errors.Is(err, http.ErrNotMultipart) {
		return got
	}
	for _, k := range mailgunFields {
		got[k] = r.PostForm.Get(k)
		if got[k] == "" && r.MultipartForm != nil && len(r.MultipartForm.Value[k]) > 0 {
			got[k] = r.MultipartForm.Value[k][0]
		}
	}
	return got
}
