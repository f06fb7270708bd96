package forward

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
)

// FuzzForwardWriter: whatever the limit, the declared length and the
// sizes of the writes, the client receives exactly the bytes written, in
// order; the body is buffered (and so recordable) exactly when it and its
// Content-Length fit the limit, and never more than the limit is held.
func FuzzForwardWriter(f *testing.F) {
	f.Add(int64(16), int64(-1), []byte{3, 5, 7})
	f.Add(int64(16), int64(100), []byte{50, 50})
	f.Add(int64(0), int64(-1), []byte{0, 1})
	f.Add(int64(64), int64(10), []byte{10})
	f.Fuzz(func(t *testing.T, limit, contentLength int64, sizes []byte) {
		if limit < 0 || limit > 1<<16 {
			return
		}
		client := httptest.NewRecorder()
		fw := newForwardWriter(client, new(bytes.Buffer), limit)
		if contentLength >= 0 {
			fw.Header().Set("Content-Length", strconv.FormatInt(contentLength, 10))
		}
		fw.WriteHeader(http.StatusCreated)
		var want bytes.Buffer
		for i, n := range sizes {
			p := bytes.Repeat([]byte{byte('a' + i%26)}, int(n))
			want.Write(p)
			if got, err := fw.Write(p); got != len(p) || err != nil {
				t.Fatalf("Write(%d bytes) = %d, %v", len(p), got, err)
			}
			if fw.FlushError() != nil {
				t.Fatal("FlushError failed")
			}
			if len(fw.Body()) > int(limit) {
				t.Fatalf("%d bytes buffered over the limit %d", len(fw.Body()), limit)
			}
		}
		fw.finish()
		if client.Code != http.StatusCreated {
			t.Fatalf("client status %d, want 201", client.Code)
		}
		if !bytes.Equal(client.Body.Bytes(), want.Bytes()) {
			t.Fatalf("client got %d bytes, want the %d written", client.Body.Len(), want.Len())
		}
		fits := int64(want.Len()) <= limit && contentLength <= limit
		if fw.Streamed() == fits {
			t.Fatalf("Streamed() = %v with %d bytes, Content-Length %d, limit %d", fw.Streamed(), want.Len(), contentLength, limit)
		}
		if fits && !bytes.Equal(fw.Body(), want.Bytes()) {
			t.Fatal("the buffered body differs from what was written")
		}
	})
}

// failingWriter fails every body write, as a connection to a client that
// left does.
type failingWriter struct {
	*httptest.ResponseRecorder
	writes int
}

func (w *failingWriter) Write(p []byte) (int, error) {
	w.writes++
	return 0, http.ErrHandlerTimeout
}

// TestForwardWriterDiscardsAfterTheClientLeft: once a write to the client
// fails, later writes succeed for the handler below and reach no one, so
// reverse_proxy copies the upstream's answer to its end.
func TestForwardWriterDiscardsAfterTheClientLeft(t *testing.T) {
	client := &failingWriter{ResponseRecorder: httptest.NewRecorder()}
	fw := newForwardWriter(client, nil, 0)
	fw.WriteHeader(http.StatusOK)
	for range 5 {
		if n, err := fw.Write([]byte("chunk")); n != 5 || err != nil {
			t.Fatalf("Write = %d, %v; want the bytes taken", n, err)
		}
	}
	if client.writes != 1 || fw.clientErr == nil {
		t.Fatalf("%d writes reached the client, clientErr %v; want 1 and the error kept", client.writes, fw.clientErr)
	}
}

// newForwardWriter returns a writer that buffers up to limit bytes in buf,
// or streams from the start when buf is nil, as Send makes it.
func newForwardWriter(w http.ResponseWriter, buf *bytes.Buffer, limit int64) *forwardWriter {
	return &forwardWriter{w: w, buf: buf, limit: limit}
}
