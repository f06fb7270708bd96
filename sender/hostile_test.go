package sender

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookgate/hookgate/verify"
)

// deadLetter sends one envelope, id, to url with one attempt, and returns
// its dead letter, and the sender's logs.
func deadLetter(t *testing.T, url, id string, tweak func(*Sender)) (*Envelope, *logs) {
	t.Helper()
	q := newMemQueue()
	cfg := testConfig()
	cfg.Attempts = 1
	s, logs := newTestSender(t, q, cfg, []Destination{{Name: "d", URL: url}}, nil, Options{})
	if tweak != nil {
		tweak(s)
	}
	enqueueN(t, s, "d", id, 1)
	run(t, s)
	waitFor(t, "the dead letter", func() bool {
		_, state, _ := q.Get(t.Context(), "d", id+"-0")
		return state == StateDead
	})
	e, _, _ := q.Get(t.Context(), "d", id+"-0")
	return e, logs
}

// countingConn counts the bytes read from a connection.
type countingConn struct {
	net.Conn
	read *atomic.Int64
}

func (c countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read.Add(int64(n))
	return n, err
}

// TestResponseHeadersAreBounded: a receiver that sends headers without end
// fails the attempt as a network error once 64 KiB of them are read: no
// more is read from the connection, and it does not wait for the timeout.
func TestResponseHeadersAreBounded(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		c, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer func() { _ = c.Close() }()
		if _, err := buf.WriteString("HTTP/1.1 200 OK\r\n"); err != nil {
			return
		}
		line := "X-Pad: " + strings.Repeat("a", 1000) + "\r\n"
		for range 20_000 { // 20 MB, or until the sender hangs up
			if _, err := buf.WriteString(line); err != nil || buf.Flush() != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	var read atomic.Int64
	start := time.Now()
	e, _ := deadLetter(t, srv.URL, "endless", func(s *Sender) {
		tr := s.client.Transport.(*http.Transport)
		dial := tr.DialContext
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return countingConn{c, &read}, nil
		}
	})
	if e.Class != ClassNetwork || !strings.Contains(e.LastError, "exceeded 65536 bytes") {
		t.Errorf("class %s, error %q; want network, headers exceeded 65536 bytes", e.Class, e.LastError)
	}
	if n := read.Load(); n > 64<<10+4<<10 {
		t.Errorf("%d bytes read from the receiver, want at most the 64 KiB bound and a read buffer", n)
	}
	if took := time.Since(start); took >= testConfig().Timeout {
		t.Errorf("the attempt took %s: it waited for the timeout", took)
	}
}

// TestErrorsNameOnlyTheOrigin: a destination URL's user info, path and
// query (where webhook secrets live) never reach an attempt's error, nor
// the logs: errors name scheme://host:port.
func TestErrorsNameOnlyTheOrigin(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	_ = l.Close()
	hangUp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
			_ = c.Close()
		}
	}))
	t.Cleanup(hangUp.Close)
	for name, addr := range map[string]string{"closed port": closed, "hang-up": strings.TrimPrefix(hangUp.URL, "http://")} {
		t.Run(name, func(t *testing.T) {
			e, logs := deadLetter(t, "http://hookuser:pa55word@"+addr+"/hooks/s3cr3t-path?token=s3cr3t-query", "x", nil)
			if e.Class != ClassNetwork || len(e.Log) != 1 || e.Log[0].Error != e.LastError {
				t.Fatalf("class %s, log %+v; want one network failure", e.Class, e.Log)
			}
			if !strings.Contains(e.LastError, `"http://`+addr+`"`) {
				t.Errorf("error %q does not name http://%s", e.LastError, addr)
			}
			for _, secret := range []string{"s3cr3t", "pa55word", "hookuser", "/hooks"} {
				if strings.Contains(e.LastError, secret) || strings.Contains(logs.String(), secret) {
					t.Errorf("%q in the error %q or the logs:\n%s", secret, e.LastError, logs)
				}
			}
		})
	}
}

// TestURLIsCheckedAtNew: a URL that does not parse is refused by New,
// without quoting it.
func TestURLIsCheckedAtNew(t *testing.T) {
	_, err := New(newMemQueue(), testConfig(), []Destination{{Name: "d", URL: "http://u:s3cr3t@host:bad port/"}}, Options{})
	if err == nil || strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("New = %v; want an error that does not quote the URL", err)
	}
}

// TestContentTypeIsKept: a request carries its envelope's content type
// (application/json when it has none); a destination's own Content-Type
// header overrides it.
func TestContentTypeIsKept(t *testing.T) {
	for _, tt := range []struct {
		name, enqueued, configured, want string
	}{
		{"enqueued", "application/cloudevents+json; charset=utf-8", "", "application/cloudevents+json; charset=utf-8"},
		{"none", "", "", "application/json"},
		{"configured", "text/plain", "application/x-www-form-urlencoded", "application/x-www-form-urlencoded"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := &destination{Destination: Destination{Name: "d", Header: http.Header{}}}
			if tt.configured != "" {
				d.Header.Set("Content-Type", tt.configured)
			}
			h, _ := d.header(&Envelope{ID: "m", ContentType: tt.enqueued, Payload: []byte("x")}, time.Now())
			if got := h.Values("Content-Type"); len(got) != 1 || got[0] != tt.want {
				t.Errorf("Content-Type %q, want %q", got, tt.want)
			}
		})
	}
}

// failingSigner cannot sign (a twilio destination sent a JSON body whose
// URL has no bodySHA256, say).
type failingSigner struct{}

func (failingSigner) SignRequest(verify.Request, string, time.Time) (http.Header, error) {
	return nil, errors.New("cannot sign this body")
}

// TestUnsignableIsNeverSentUnsigned: a request the signer refuses is not
// sent without its signature: it fails as a request error, and the
// receiver sees nothing.
func TestUnsignableIsNeverSentUnsigned(t *testing.T) {
	var got atomic.Int64
	rcv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { got.Add(1) }))
	t.Cleanup(rcv.Close)
	e, _ := deadLetter(t, rcv.URL, "unsignable", func(s *Sender) {
		d, _ := s.dest("d")
		d.Signer = failingSigner{}
	})
	if e.Class != ClassRequest || !strings.Contains(e.LastError, "signing: cannot sign this body") || got.Load() != 0 {
		t.Errorf("class %s, error %q, receiver got %d requests; want a request failure naming the signing, nothing sent", e.Class, e.LastError, got.Load())
	}
}
