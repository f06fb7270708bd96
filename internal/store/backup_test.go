package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/internal/problem"
)

// TestBackupWhileWriting: GET /hookgate/store/backup streams a copy of
// the embedded store, its Content-Length the bytes sent, while claims go
// on; the copy passes the store check, and a store opened on it holds
// every key claimed before the backup began.
func TestBackupWhileWriting(t *testing.T) {
	logger := slog.New(slog.DiscardHandler)
	c, err := Open(Config{Backend: "file", Dir: t.TempDir()}, logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Destruct() })
	st, now := c.State(""), time.Now()
	claim := func(key string) {
		t.Helper()
		res, err := st.Claim(t.Context(), key, dedupe.Claim{Token: "t", Lease: time.Minute, Retention: time.Hour, Now: now})
		if err != nil || res.Status != dedupe.Claimed {
			t.Errorf("claim %s: %+v %v", key, res, err)
		}
	}
	for i := range 200 {
		claim(fmt.Sprint("before-", i))
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
				claim(fmt.Sprint("during-", i))
			}
		}
	})
	srv := httptest.NewServer(BackupHandler{Conn: func() (*Conn, error) { return c, nil }, Logger: logger})
	defer srv.Close()
	resp, err := http.Get(srv.URL + BackupPath)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	close(stop)
	wg.Wait()
	if err != nil || resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/octet-stream" ||
		resp.Header.Get("Content-Length") != strconv.Itoa(len(body)) || len(body) == 0 {
		t.Fatalf("backup: %d %v, Content-Type %q, Content-Length %q, %d bytes read", resp.StatusCode, err,
			resp.Header.Get("Content-Type"), resp.Header.Get("Content-Length"), len(body))
	}

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, StateFile), body, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := CheckStateFile(filepath.Join(dir, StateFile), 0); err != nil {
		t.Fatalf("the copy does not pass the check: %v", err)
	}
	restored, err := Open(Config{Backend: "file", Dir: dir}, logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = restored.Destruct() })
	for i := range 200 {
		e, err := restored.State("").Get(t.Context(), fmt.Sprint("before-", i), now)
		if err != nil || e.State != dedupe.StateClaimed {
			t.Fatalf("the copy's before-%d: %+v %v; want it claimed", i, e, err)
		}
	}
}

// TestBackupRefusals: on Redis the route answers 409 store_not_file, naming
// Redis's own persistence; another method 405; a store that does not open
// 503 store_unavailable.
func TestBackupRefusals(t *testing.T) {
	logger := slog.New(slog.DiscardHandler)
	rc, err := Open(Config{Backend: "redis", URLs: []string{"redis://127.0.0.1:1/0"}}, logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rc.Destruct() })
	fc, err := Open(Config{Backend: "file", Dir: t.TempDir()}, logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fc.Destruct() })
	for _, tc := range []struct {
		name   string
		conn   func() (*Conn, error)
		method string
		status int
		reason string
	}{
		{"redis", func() (*Conn, error) { return rc, nil }, http.MethodGet, 409, problem.StoreNotFile.Code},
		{"post", func() (*Conn, error) { return fc, nil }, http.MethodPost, 405, problem.MethodNotAllowed.Code},
		{"unopened", func() (*Conn, error) { return nil, fmt.Errorf("store file: locked") }, http.MethodGet, 503, problem.StoreUnavailable.Code},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			BackupHandler{Conn: tc.conn, Logger: logger}.ServeHTTP(w, httptest.NewRequest(tc.method, BackupPath, nil))
			var p struct {
				Reason, Detail string
			}
			if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || w.Code != tc.status || p.Reason != tc.reason ||
				w.Header().Get("Content-Type") != "application/problem+json" {
				t.Errorf("%d %s %s; want %d %s", w.Code, w.Header().Get("Content-Type"), w.Body, tc.status, tc.reason)
			}
			if tc.name == "redis" && p.Detail != ErrNotFile.Error() {
				t.Errorf("detail %q, want %q", p.Detail, ErrNotFile)
			}
		})
	}
}

// TestBackupStalledReaderHoldsNothing: a client that reads the backup's
// headers, then stops reading, holds no read transaction of the store:
// claims and 16 MiB of writes go on
// and complete while it stalls, and no copy is left in the store's
// directory. When the client reads on, it gets the whole copy, sound. The
// minute is a guard against a hang, not a measure.
func TestBackupStalledReaderHoldsNothing(t *testing.T) {
	logger := slog.New(slog.DiscardHandler)
	dir := t.TempDir()
	c, err := Open(Config{Backend: "file", Dir: dir}, logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Destruct() })
	fill := func(bucket string) error { // 16 MiB: more than a stalled loopback connection buffers
		value := bytes.Repeat([]byte("x"), 1<<20)
		for i := range 16 {
			if err := c.db.Update(func(tx *bolt.Tx) error {
				b, err := tx.CreateBucketIfNotExists([]byte(bucket))
				if err != nil {
					return err
				}
				return b.Put(fmt.Append(nil, i), value)
			}); err != nil {
				return err
			}
		}
		return nil
	}
	if err := fill("before"); err != nil {
		t.Fatal(err)
	}

	srv := httptest.NewServer(BackupHandler{Conn: func() (*Conn, error) { return c, nil }, Logger: logger})
	t.Cleanup(srv.Close)
	resp, err := http.Get(srv.URL + BackupPath) // its headers only: the body is not read yet
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() }) // on a failure, lets the handler end before the store closes
	if resp.StatusCode != 200 {
		t.Fatalf("backup: %s", resp.Status)
	}
	if n := c.db.Stats().OpenTxN; n != 0 {
		t.Fatalf("while the client stalls, %d read transactions are open; want none", n)
	}

	done := make(chan error, 1)
	go func() {
		st, now := c.State(""), time.Now()
		for i := range 100 {
			res, err := st.Claim(t.Context(), fmt.Sprint("during-", i), dedupe.Claim{Token: "t", Lease: time.Minute, Retention: time.Hour, Now: now})
			if err == nil && res.Status != dedupe.Claimed {
				err = fmt.Errorf("claim during-%d: %+v", i, res)
			}
			if err != nil {
				done <- err
				return
			}
		}
		done <- fill("during")
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("claims and writes waited for a client that stopped reading a backup")
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 || entries[0].Name() != StateFile {
		t.Errorf("the store's directory holds %v (%v); want only %s", entries, err, StateFile)
	}

	body, err := io.ReadAll(resp.Body)
	if err != nil || strconv.Itoa(len(body)) != resp.Header.Get("Content-Length") {
		t.Fatalf("the rest of the backup: %d bytes, Content-Length %s, %v", len(body), resp.Header.Get("Content-Length"), err)
	}
	copyDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(copyDir, StateFile), body, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := CheckStateFile(filepath.Join(copyDir, StateFile), 0); err != nil {
		t.Fatalf("the copy does not pass the check: %v", err)
	}
	restored, err := bolt.Open(filepath.Join(copyDir, StateFile), 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = restored.Close() }()
	if err := restored.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket([]byte("before")); b == nil || b.Stats().KeyN != 16 {
			return fmt.Errorf("the copy lacks what was written before the backup")
		}
		if tx.Bucket([]byte("during")) != nil {
			return fmt.Errorf("the copy holds what was written after the backup began")
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
}
