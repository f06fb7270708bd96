package verify

import (
	"bytes"
	"errors"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// The vector of mailgun-php's tests/Api/WebhookTest.php,
// testVerifyWebhookGood (MIT), which mailgun-go v4.23.0's
// VerifyWebhookSignature (the JSON shape's fields) and
// VerifyWebhookRequest (the form) accept too.
const (
	mailgunKey       = "key-3ax6xnjp29jd6fds4gc373sgvjxteol0"
	mailgunTimestamp = "1403645220"
	mailgunToken     = "5egbgr1vjgqxtrnp65xfznchgdccwh5d6i09vijqi3whgowmn6"
	mailgunSignature = "9cfc5c41582e51246e73c88d34db3af0a3a2692a76fbab81492842f000256d33"
)

var mailgunAt = time.Unix(1403645220, 0).Add(time.Minute)

var (
	mailgunJSONType = http.Header{"Content-Type": {"application/json"}}
	mailgunForm     = http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
)

// mailgunJSONBody is a JSON webhook with the given signature fields.
func mailgunJSONBody(ts, token, sig string) []byte {
	return []byte(`{"signature":{"timestamp":"` + ts + `","token":"` + token + `","signature":"` + sig + `"},` +
		`"event-data":{"event":"delivered","id":"CPgfbmQMTCKtHW6uIWtuVe","recipient":"alice@example.com"}}`)
}

// mailgunFormBody is a legacy webhook's urlencoded form.
func mailgunFormBody(ts, token, sig string) []byte {
	return []byte("event=delivered&recipient=alice%40example.com&timestamp=" + ts + "&token=" + token + "&signature=" + sig)
}

// mailgunMultipartBody is a legacy webhook's multipart form, with the
// extra fields given, and its Content-Type.
func mailgunMultipartBody(t *testing.T, fields [][2]string) ([]byte, http.Header) {
	t.Helper()
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	for _, f := range fields {
		if err := w.WriteField(f[0], f[1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes(), http.Header{"Content-Type": {w.FormDataContentType()}}
}

// TestMailgunVector: mailgun-php's vector verifies in each shape, with the
// token as the delivery ID; a changed token or timestamp, another key, a
// stale or a future timestamp are refused.
func TestMailgunVector(t *testing.T) {
	v := mustNew(t, "mailgun", []string{mailgunKey}, Options{})
	multi, multiType := mailgunMultipartBody(t, [][2]string{{"event", "delivered"},
		{"timestamp", mailgunTimestamp}, {"token", mailgunToken}, {"signature", mailgunSignature}})
	otherToken := "6egbgr1vjgqxtrnp65xfznchgdccwh5d6i09vijqi3whgowmn6"
	for _, tt := range []struct {
		name   string
		header http.Header
		body   []byte
		at     time.Time
		want   error
	}{
		{"json", mailgunJSONType, mailgunJSONBody(mailgunTimestamp, mailgunToken, mailgunSignature), mailgunAt, nil},
		{"json; charset", http.Header{"Content-Type": {"application/json; charset=utf-8"}}, mailgunJSONBody(mailgunTimestamp, mailgunToken, mailgunSignature), mailgunAt, nil},
		{"form", mailgunForm, mailgunFormBody(mailgunTimestamp, mailgunToken, mailgunSignature), mailgunAt, nil},
		{"multipart", multiType, multi, mailgunAt, nil},
		{"json, changed token", mailgunJSONType, mailgunJSONBody(mailgunTimestamp, otherToken, mailgunSignature), mailgunAt, ErrBadSignature},
		{"json, changed timestamp", mailgunJSONType, mailgunJSONBody("1403645221", mailgunToken, mailgunSignature), mailgunAt, ErrBadSignature},
		{"form, changed token", mailgunForm, mailgunFormBody(mailgunTimestamp, otherToken, mailgunSignature), mailgunAt, ErrBadSignature},
		{"form, changed timestamp", mailgunForm, mailgunFormBody("1403645221", mailgunToken, mailgunSignature), mailgunAt, ErrBadSignature},
		{"json, stale", mailgunJSONType, mailgunJSONBody(mailgunTimestamp, mailgunToken, mailgunSignature), mailgunAt.Add(10 * time.Minute), ErrTimestampOutOfTolerance},
		{"form, stale", mailgunForm, mailgunFormBody(mailgunTimestamp, mailgunToken, mailgunSignature), mailgunAt.Add(10 * time.Minute), ErrTimestampOutOfTolerance},
		{"json, future", mailgunJSONType, mailgunJSONBody(mailgunTimestamp, mailgunToken, mailgunSignature), mailgunAt.Add(-10 * time.Minute), ErrTimestampOutOfTolerance},
	} {
		d, err := v.Verify(Request{Header: tt.header, Body: tt.body}, tt.at)
		if tt.want == nil {
			if err != nil || d.ID != mailgunToken || d.Key != KeyID || d.DedupeKey(nil) != mailgunToken || d.Scheme != "mailgun" ||
				!d.Timestamp.Equal(time.Unix(1403645220, 0)) {
				t.Errorf("%s: Verify = %+v, %v; want the token as its ID and key", tt.name, d, err)
			}
			continue
		}
		if !errors.Is(err, tt.want) {
			t.Errorf("%s: err = %v, want %v", tt.name, err, tt.want)
		}
	}
	other := mustNew(t, "mailgun", []string{"another-signing-key"}, Options{})
	if _, err := other.Verify(Request{Header: mailgunJSONType, Body: mailgunJSONBody(mailgunTimestamp, mailgunToken, mailgunSignature)}, mailgunAt); !errors.Is(err, ErrBadSignature) {
		t.Errorf("another key: err = %v, want ErrBadSignature", err)
	}
	rotated := mustNew(t, "mailgun", []string{"another-signing-key", mailgunKey}, Options{})
	if _, err := rotated.Verify(Request{Header: mailgunJSONType, Body: mailgunJSONBody(mailgunTimestamp, mailgunToken, mailgunSignature)}, mailgunAt); err != nil {
		t.Errorf("the key second of two: %v", err)
	}
}

// TestMailgunMalformed: a body without its signature fields, with one
// given twice (in the JSON signature object, at the JSON top level, in
// another case, or as a repeated form field), or out of bounds is 400 malformed_body, not
// a missing header; so is a body whose Content-Type is neither JSON nor
// a form.
func TestMailgunMalformed(t *testing.T) {
	v := mustNew(t, "mailgun", []string{mailgunKey}, Options{})
	good := string(mailgunJSONBody(mailgunTimestamp, mailgunToken, mailgunSignature))
	form := string(mailgunFormBody(mailgunTimestamp, mailgunToken, mailgunSignature))
	multiDup, multiDupType := mailgunMultipartBody(t, [][2]string{{"timestamp", mailgunTimestamp},
		{"token", mailgunToken}, {"token", "unsigned"}, {"signature", mailgunSignature}})
	multiNone, multiNoneType := mailgunMultipartBody(t, [][2]string{{"event", "delivered"}})
	for _, tt := range []struct {
		name   string
		header http.Header
		body   string
	}{
		{"json, no signature", mailgunJSONType, `{"event-data":{"event":"delivered"}}`},
		{"json, no token", mailgunJSONType, `{"signature":{"timestamp":"1403645220","signature":"` + mailgunSignature + `"}}`},
		{"json, a number for timestamp", mailgunJSONType, strings.Replace(good, `"timestamp":"1403645220"`, `"timestamp":1403645220`, 1)},
		{"json, token twice", mailgunJSONType, strings.Replace(good, `"token":`, `"token":"unsigned","token":`, 1)},
		{"json, signature object twice", mailgunJSONType, good[:len(good)-1] + `,"signature":{}}`},
		{"json, not an object", mailgunJSONType, `["signature"]`},
		{"json, two values", mailgunJSONType, good + good},
		{"json, trailing bytes", mailgunJSONType, good + "}"},
		{"json, token in another case too", mailgunJSONType, strings.Replace(good, `"token":`, `"Token":"unsigned","token":`, 1)},
		{"json, signature object in another case too", mailgunJSONType, good[:len(good)-1] + `,"Signature":{}}`},
		{"json, signature not hex", mailgunJSONType, strings.Replace(good, mailgunSignature, strings.Repeat("zz", 32), 1)},
		{"json, signature short", mailgunJSONType, strings.Replace(good, mailgunSignature, mailgunSignature[:62], 1)},
		{"json, timestamp not canonical", mailgunJSONType, strings.Replace(good, `"1403645220"`, `"01403645220"`, 1)},
		{"json, token too long", mailgunJSONType, strings.Replace(good, mailgunToken, strings.Repeat("a", mailgunMaxToken+1), 1)},
		{"json, token empty", mailgunJSONType, strings.Replace(good, mailgunToken, "", 1)},
		{"form, token twice", mailgunForm, form + "&token=unsigned"},
		{"form, timestamp twice", mailgunForm, form + "&timestamp=" + mailgunTimestamp},
		{"form, no signature", mailgunForm, "event=delivered&timestamp=1403645220&token=" + mailgunToken},
		{"form, bad escape", mailgunForm, form + "&x=%zz"},
		{"multipart, token twice", multiDupType, string(multiDup)},
		{"multipart, no fields", multiNoneType, string(multiNone)},
		{"multipart, no boundary", http.Header{"Content-Type": {"multipart/form-data"}}, form},
		{"no Content-Type", http.Header{}, good},
		{"text/plain", http.Header{"Content-Type": {"text/plain"}}, good},
	} {
		_, err := v.Verify(Request{Header: tt.header, Body: []byte(tt.body)}, mailgunAt)
		if !errors.Is(err, ErrMalformedBody) {
			t.Errorf("%s: err = %v, want ErrMalformedBody", tt.name, err)
		}
	}
	h := http.Header{"Content-Type": {"application/json", "application/json"}}
	if _, err := v.Verify(Request{Header: h, Body: []byte(good)}, mailgunAt); !errors.Is(err, ErrMalformedHeader) {
		t.Errorf("Content-Type twice: err = %v, want ErrMalformedHeader", err)
	}
}

// TestMailgunSign: SignMessage writes mailgun-php's vector into a JSON
// webhook's signature object and into a form's fields, the token from
// id; each verifies, and SignRequest, which has no body to write, says
// to use SignMessage.
func TestMailgunSign(t *testing.T) {
	v := mustNew(t, "mailgun", []string{mailgunKey}, Options{})
	at := time.Unix(1403645220, 0)
	event := []byte(`{"event-data":{"event":"delivered","recipient":"alice@example.com"}}`)
	h, body, err := v.SignMessage(Request{Header: mailgunJSONType, Body: event}, mailgunToken, at)
	if err != nil {
		t.Fatal(err)
	}
	f, err := mailgunJSON(body)
	if err != nil || f["timestamp"] != mailgunTimestamp || f["token"] != mailgunToken || f["signature"] != mailgunSignature || h.Get("Content-Type") != "application/json" {
		t.Fatalf("signed JSON: %s (%v), %v", body, err, h)
	}
	if !bytes.Contains(body, []byte(`"event-data":{"event":"delivered","recipient":"alice@example.com"}`)) {
		t.Errorf("the event data changed: %s", body)
	}
	if _, err := v.Verify(Request{Header: h, Body: body}, mailgunAt); err != nil {
		t.Errorf("the signed JSON: %v", err)
	}

	h, body, err = v.SignMessage(Request{Header: mailgunForm, Body: []byte("event=delivered&recipient=alice%40example.com")}, mailgunToken, at)
	if err != nil {
		t.Fatal(err)
	}
	q, err := url.ParseQuery(string(body))
	if err != nil || q.Get("signature") != mailgunSignature || q.Get("event") != "delivered" || h.Get("Content-Type") != "application/x-www-form-urlencoded" {
		t.Fatalf("signed form: %s (%v), %v", body, err, h)
	}
	if _, err := v.Verify(Request{Header: h, Body: body}, mailgunAt); err != nil {
		t.Errorf("the signed form: %v", err)
	}

	if _, _, err := v.SignMessage(Request{Header: mailgunJSONType, Body: []byte(`[1]`)}, "t", at); err == nil {
		t.Error("signed a JSON array")
	}
	if _, err := v.SignRequest(Request{Header: mailgunJSONType, Body: event}, "t", at); err == nil || !strings.Contains(err.Error(), "SignMessage") {
		t.Errorf("SignRequest: %v, want an error naming SignMessage", err)
	}
}
