package sender

import (
	"bytes"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"
)

func receivedFixture() *Received {
	return &Received{
		Source: "github",
		Path:   "/hooks/github?x=1&y=2",
		Header: http.Header{
			"X-Github-Event":    {"push"},
			"X-Github-Delivery": {"d-1"},
			"X-Multi":           {"a", "", "c"},
		},
		Redact: []string{"X-Github-Delivery"},
	}
}

// TestReceivedStoredForm: a Received block round-trips through a record
// and a stored payload, the body after it byte for byte; size is the
// stored form's length; and a record without one is as it was.
func TestReceivedStoredForm(t *testing.T) {
	t0 := time.UnixMilli(1_700_000_000_000)
	body := []byte(`{"id":"evt_1"}`)
	e := &Envelope{ID: "evt_1", Destination: "svc", CreatedAt: t0, NextAt: t0, Payload: body, Received: receivedFixture()}
	stored := StoredPayload(e)
	m := MetaOf(e)
	if m.ReceivedSize != len(appendReceived(nil, e.Received)) || m.ReceivedSize != len(stored)-len(body) {
		t.Fatalf("ReceivedSize %d, stored block %d bytes", m.ReceivedSize, len(stored)-len(body))
	}
	if m.Size != len(body) || m.Fingerprint != PayloadFingerprint(body) {
		t.Errorf("the record's size and fingerprint must be the body's: %d %x", m.Size, m.Fingerprint)
	}
	back, err := UnmarshalMeta("svc", "evt_1", MarshalMeta(m))
	if err != nil || back.ReceivedSize != m.ReceivedSize {
		t.Fatalf("UnmarshalMeta: %+v, %v", back, err)
	}
	got, err := Assemble(back, stored, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Payload, body) || !reflect.DeepEqual(got.Received, e.Received) {
		t.Errorf("assembled: payload %q, received %+v", got.Payload, got.Received)
	}
	// The same request stores the same bytes, whatever the map's order.
	for range 20 {
		if again := StoredPayload(e); !bytes.Equal(again, stored) {
			t.Fatal("the stored form is not deterministic")
		}
	}
	// A payload no longer kept: the record stays readable.
	if got, err := Assemble(back, nil, nil); err != nil || got.Received != nil || got.Payload != nil {
		t.Errorf("an expired payload: %+v, %v", got, err)
	}

	plain := &Envelope{ID: "p", Destination: "svc", CreatedAt: t0, NextAt: t0, Payload: body}
	pm := MetaOf(plain)
	rec := MarshalMeta(pm)
	if pm.ReceivedSize != 0 || !bytes.Equal(StoredPayload(plain), body) {
		t.Fatalf("an envelope without Received: size %d", pm.ReceivedSize)
	}
	pm2, err := UnmarshalMeta("svc", "p", rec)
	if err != nil || pm2.ReceivedSize != 0 {
		t.Fatalf("%+v %v", pm2, err)
	}
	if len(rec) != len(MarshalMeta(m))-uvarintSize(m.ReceivedSize) {
		t.Errorf("a record without Received grew: %d bytes", len(rec))
	}
	// A record that claims more than the stored payload holds is an
	// error, not a panic.
	back.ReceivedSize = len(stored) + 1
	if _, err := Assemble(back, stored, nil); err == nil {
		t.Error("a short stored payload assembled")
	}
}

func TestUvarintSize(t *testing.T) {
	for _, n := range []int{0, 1, 127, 128, 16383, 16384, 1 << 30} {
		var b []byte
		b = appendUvarint(b, n)
		if uvarintSize(n) != len(b) {
			t.Errorf("uvarintSize(%d) = %d, want %d", n, uvarintSize(n), len(b))
		}
	}
}

func appendUvarint(b []byte, n int) []byte {
	for n >= 0x80 {
		b = append(b, byte(n)|0x80)
		n >>= 7
	}
	return append(b, byte(n))
}

func TestShown(t *testing.T) {
	r := receivedFixture()
	h := r.Shown()
	if h.Get("X-Github-Delivery") != Redacted || h.Get("X-Github-Event") != "push" || len(h["X-Multi"]) != 3 {
		t.Errorf("Shown = %v", h)
	}
	if r.Header.Get("X-Github-Delivery") != "d-1" {
		t.Error("Shown changed the kept header")
	}
	if (*Received)(nil).Shown() != nil {
		t.Error("nil Received shows headers")
	}
}

// TestJoinURL: keep_path appends a path under the destination's own and
// a query after its own, and nothing a request sends takes it elsewhere.
func TestJoinURL(t *testing.T) {
	for _, c := range []struct{ base, received, want string }{
		{"http://svc.internal/webhooks", "/github?a=1", "http://svc.internal/webhooks/github?a=1"},
		{"http://svc.internal/webhooks/", "/github", "http://svc.internal/webhooks/github"},
		{"http://svc.internal", "/", "http://svc.internal/"},
		{"http://svc.internal/in?token=t", "/x?a=1", "http://svc.internal/in/x?token=t&a=1"},
		{"http://svc.internal/in", "/../../etc/passwd", "http://svc.internal/in/etc/passwd"},
		{"http://svc.internal/in", "//evil.example/x", "http://svc.internal/in/evil.example/x"},
		{"http://svc.internal/in", "/%2e%2e/%2e%2e/admin", "http://svc.internal/in/admin"},
		{"http://svc.internal/in", "/a%2Fb", "http://svc.internal/in/a/b"},
		{"http://svc.internal/in", "/caf%C3%A9", "http://svc.internal/in/caf%C3%A9"},
		{"https://u:p@svc.internal:8443/in", "/x", "https://u:p@svc.internal:8443/in/x"},
		{"http://svc.internal/in", "/x/..;/..;/admin", "http://svc.internal/in/admin"},
		{"http://svc.internal/in", "/..;jsessionid=1/admin", "http://svc.internal/in/admin"},
		{"http://svc.internal/in", "/a;v=1/b", "http://svc.internal/in/a;v=1/b"},
		{"http://svc.internal/in", "/..%5C..%5Cadmin", "http://svc.internal/in/admin"},
		{"http://svc.internal/in?tenant=acme", "/x?tenant=evil&a=1&tenant=x", "http://svc.internal/in/x?tenant=acme&a=1"},
		{"http://svc.internal/in?tenant=acme", "/x?%74enant=evil", "http://svc.internal/in/x?tenant=acme"},
	} {
		base, err := url.Parse(c.base)
		if err != nil {
			t.Fatal(err)
		}
		if got := joinURL(base, c.received).String(); got != c.want {
			t.Errorf("joinURL(%s, %s) = %s, want %s", c.base, c.received, got, c.want)
		}
		if base.String() != c.base {
			t.Errorf("joinURL changed its base: %s", base)
		}
	}
}

// FuzzJoinURL: whatever the received path, the URL keeps the
// destination's scheme, user info and host, and stays under its path.
func FuzzJoinURL(f *testing.F) {
	for _, s := range []string{"/a?b=c", "/../..", "//evil/x", "/%2e%2e/x", "http://evil/x", "/a/./b//c", "?x", "/a#frag", "/\\evil",
		"/x/..;/..;/admin", "/%2e%2e;x/y", "/a?k=evil", "/a?k=1&k=2"} {
		f.Add(s)
	}
	base, _ := url.Parse("https://u:p@svc.internal:8443/in?k=v")
	f.Fuzz(func(t *testing.T, received string) {
		u := joinURL(base, received)
		if u.Scheme != base.Scheme || u.Host != base.Host || u.User.String() != base.User.String() {
			t.Fatalf("joinURL(%q) = %s: left the destination", received, u)
		}
		if !strings.HasPrefix(u.Path, "/in") || strings.Contains(u.Path, "\\") {
			t.Fatalf("joinURL(%q) = %s: left the destination's path", received, u)
		}
		for seg := range strings.SplitSeq(u.Path, "/") {
			if dots, _, _ := strings.Cut(seg, ";"); dots == ".." || dots == "." {
				t.Fatalf("joinURL(%q) = %s: a segment %q climbs", received, u, seg)
			}
		}
		if k := u.Query()["k"]; len(k) != 1 || k[0] != "v" || !strings.HasPrefix(u.RawQuery, "k=v") {
			t.Fatalf("joinURL(%q) = %s: the destination's query does not win", received, u)
		}
		again, err := url.Parse(u.String())
		if err != nil || again.Host != base.Host {
			t.Fatalf("joinURL(%q) = %s: reparsed as %v, %v", received, u, again, err)
		}
	})
}

// FuzzReadReceived: a damaged stored block is an error, never a panic
// nor an allocation without bound; a good one reads back as written.
func FuzzReadReceived(f *testing.F) {
	f.Add(appendReceived(nil, receivedFixture()))
	f.Add(appendReceived(nil, &Received{}))
	f.Add([]byte{0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := readReceived(b)
		if err != nil {
			return
		}
		if again := appendReceived(nil, r); !bytes.Equal(again, b) || len(again) != r.size() {
			t.Fatalf("read back as %x (size %d), stored as %x", again, r.size(), b)
		}
	})
}
