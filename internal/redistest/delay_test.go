package redistest

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net"
	"testing"
	"testing/synctest"
	"time"
)

// TestDelayLinkHoldsEachChunk: each chunk reaches the reader exactly d
// after it was written, in order (the bubble's clock is fake, so the
// times are exact).
func TestDelayLinkHoldsEachChunk(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const d = 20 * time.Millisecond
		srcR, srcW := io.Pipe()
		dstR, dstW := io.Pipe()
		done := make(chan struct{})
		go func() {
			delayLink(dstW, srcR, d)
			_ = dstW.Close()
			close(done)
		}()
		start := time.Now()
		go func() {
			for _, s := range []string{"a", "bc", "d"} {
				if _, err := srcW.Write([]byte(s)); err != nil {
					t.Errorf("write %q: %v", s, err)
				}
				time.Sleep(5 * time.Millisecond)
			}
		}()
		type read struct {
			s  string
			at time.Duration
		}
		var got []read
		buf := make([]byte, 16)
		for range 3 {
			n, err := dstR.Read(buf)
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			got = append(got, read{string(buf[:n]), time.Since(start)})
		}
		want := []read{{"a", d}, {"bc", d + 5*time.Millisecond}, {"d", d + 10*time.Millisecond}}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("read %d = %+v; want %+v", i, got[i], want[i])
			}
		}
		_ = srcW.Close()
		<-done
	})
}

// TestDelayLinkDropsWhatItHolds: when the source ends, the chunks not yet
// due are dropped (the link fails with the master), at once.
func TestDelayLinkDropsWhatItHolds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const d = 20 * time.Millisecond
		srcR, srcW := io.Pipe()
		dstR, dstW := io.Pipe()
		start := time.Now()
		go func() {
			delayLink(dstW, srcR, d)
			_ = dstW.Close()
		}()
		if _, err := srcW.Write([]byte("held")); err != nil {
			t.Fatal(err)
		}
		_ = srcW.Close()
		got, err := io.ReadAll(dstR)
		if err != nil || len(got) != 0 {
			t.Errorf("read %q, %v; want nothing, EOF", got, err)
		}
		if took := time.Since(start); took != 0 {
			t.Errorf("the link ended after %s; want at once", took)
		}
	})
}

// TestDelayProxy: through a real proxy on loopback, what the upstream
// sends reaches the client byte for byte and not before the delay, and
// what the client sends reaches the upstream byte for byte.
func TestDelayProxy(t *testing.T) {
	const d = 50 * time.Millisecond
	down := make([]byte, 1<<20)
	up := make([]byte, 64<<10)
	rng := rand.NewChaCha8([32]byte{1})
	_, _ = rng.Read(down)
	_, _ = rng.Read(up)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	firstWrite := make(chan time.Time, 1)
	gotUp := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			t.Errorf("accept: %v", err)
			gotUp <- nil
			return
		}
		defer func() { _ = c.Close() }() // the test's upstream
		go func() {
			// Writes of uneven sizes, so that chunks vary.
			firstWrite <- time.Now()
			size := 1
			for off := 0; off < len(down); {
				end := min(off+size, len(down))
				if _, err := c.Write(down[off:end]); err != nil {
					t.Errorf("upstream write: %v", err)
					return
				}
				off = end
				size = size*3%8191 + 1
			}
		}()
		// The upstream stays up until the client has read everything
		// and closed: a link whose upstream ends drops what it holds.
		b, err := io.ReadAll(c)
		if err != nil {
			t.Errorf("upstream read: %v", err)
		}
		gotUp <- b
	}()

	p := StartDelayProxy(t, ln.Addr().String(), d)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		if _, err := c.Write(up); err != nil {
			t.Errorf("client write: %v", err)
		}
	}()
	got := make([]byte, len(down))
	if _, err := io.ReadFull(c, got[:1]); err != nil {
		t.Fatal(err)
	}
	firstRead := time.Now()
	if _, err := io.ReadFull(c, got[1:]); err != nil {
		t.Fatal(err)
	}
	// Only a lower bound: the first byte cannot arrive before the delay.
	if wrote := <-firstWrite; firstRead.Sub(wrote) < d {
		t.Errorf("the first byte arrived %s after it was written; want not before %s", firstRead.Sub(wrote), d)
	}
	if !bytes.Equal(got, down) {
		t.Error("the client read other bytes than the upstream wrote")
	}
	_ = c.(*net.TCPConn).CloseWrite()
	if b := <-gotUp; !bytes.Equal(b, up) {
		t.Errorf("the upstream read %d bytes, other than the %d the client wrote", len(b), len(up))
	}
	_ = c.Close()
}
