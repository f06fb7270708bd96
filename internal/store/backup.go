package store

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hookgate/hookgate/internal/problem"
)

// BackupPath is the admin API's backup route.
const BackupPath = "/hookgate/store/backup"

// ErrNotFile is a backup of a store that is not the embedded file.
var ErrNotFile = errors.New("the store is Redis: back it up with Redis's own persistence (RDB snapshots or AOF), not through hookgate")

// Backup copies the embedded store's file, as of one read transaction,
// to a temporary file beside it, and returns that copy open at its start,
// with its size; the caller closes it. The transaction lasts as long as
// the local copy, never as long as a download: a client that stops
// reading holds no transaction, so no remap of the store's file, and with
// it no claim, record or queue write, waits for it. The copy is unlinked
// as soon as it is made: it takes disk space while it is open, and nothing
// of it is left once it is closed, whatever ends the download (or the
// process). On Redis it is ErrNotFile.
func (c *Conn) Backup() (*os.File, int64, error) {
	if c.db == nil {
		return nil, 0, ErrNotFile
	}
	f, err := os.CreateTemp(filepath.Dir(c.db.Path()), "."+StateFile+".backup-*")
	if err != nil {
		return nil, 0, fmt.Errorf("backup: the local copy: %w", err)
	}
	if err := os.Remove(f.Name()); err != nil {
		_ = f.Close() // the error reported is Remove's
		return nil, 0, fmt.Errorf("backup: the local copy: %w", err)
	}
	var n int64
	err = c.db.View(func(tx *bolt.Tx) error {
		var err error
		n, err = tx.WriteTo(f)
		return err
	})
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		_ = f.Close() // the error reported is the copy's
		return nil, 0, fmt.Errorf("backup: the local copy: %w", err)
	}
	return f, n, nil
}

// BackupHandler answers GET /hookgate/store/backup with a consistent copy
// of the embedded store's file (Conn.Backup), streamed from the local copy
// (application/octet-stream, with its Content-Length, so that a copy cut
// short is seen as such); 409
// store_not_file on Redis, 503 store_unavailable when the store does not
// open.
type BackupHandler struct {
	// Conn is the open store; it opens it if need be.
	Conn   func() (*Conn, error)
	Logger *slog.Logger
}

// ServeHTTP answers the backup route.
func (h BackupHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		problem.Write(w, problem.MethodNotAllowed, r.Method+" is not allowed here: GET the backup", 0)
		return
	}
	c, err := h.Conn()
	if err != nil {
		h.Logger.Error("backup: the store did not open", "error", err)
		problem.Write(w, problem.StoreUnavailable, err.Error(), time.Second)
		return
	}
	began := time.Now()
	f, size, err := c.Backup()
	switch {
	case errors.Is(err, ErrNotFile):
		problem.Write(w, problem.StoreNotFile, err.Error(), 0)
		return
	case err != nil:
		h.Logger.Error("backup failed", "error", err)
		problem.Write(w, problem.StoreUnavailable, err.Error(), time.Second)
		return
	}
	defer func() { _ = f.Close() }() // the copy is unlinked: closing it frees its space
	hdr := w.Header()
	hdr.Set("Content-Type", "application/octet-stream")
	hdr.Set("Content-Disposition", `attachment; filename="`+StateFile+`"`)
	hdr.Set("Content-Length", strconv.FormatInt(size, 10))
	hdr.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	n, err := io.CopyN(w, f, size)
	if err != nil {
		// The status is sent: the copy is cut short, which its
		// Content-Length tells the client.
		h.Logger.Warn("backup cut short", "bytes", n, "error", err, "by", r.RemoteAddr)
		return
	}
	h.Logger.Info("store backed up", "bytes", n, "took", time.Since(began), "by", r.RemoteAddr)
}
