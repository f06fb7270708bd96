package store

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hookgate/hookgate/internal/problem"
)

// BackupPath is the admin API's backup route.
const BackupPath = "/hookgate/store/backup"

// The reason codes of the backup route's refusals.
const (
	ReasonStoreNotFile     = "store_not_file"     // 409: the store is Redis
	ReasonStoreUnavailable = "store_unavailable"  // 503: the store did not open
	ReasonMethodNotAllowed = "method_not_allowed" // 405
)

// ErrNotFile is a backup of a store that is not the embedded file.
var ErrNotFile = errors.New("the store is Redis: back it up with Redis's own persistence (RDB snapshots or AOF), not through hookgate")

// Backup writes a consistent copy of the embedded store's file to the
// writer that start returns, given the copy's size in bytes: the file as
// of one read transaction, while writers go on. It returns the bytes
// written; on Redis it is ErrNotFile, and start is not called.
func (c *Conn) Backup(start func(size int64) io.Writer) (int64, error) {
	if c.db == nil {
		return 0, ErrNotFile
	}
	var n int64
	err := c.db.View(func(tx *bolt.Tx) error {
		var err error
		n, err = tx.WriteTo(start(tx.Size()))
		return err
	})
	return n, err
}

// BackupHandler answers GET /hookgate/store/backup with a consistent copy
// of the embedded store's file, streamed (application/octet-stream, with
// its Content-Length, so that a copy cut short is seen as such); 409
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
		problem.Write(w, http.StatusMethodNotAllowed, ReasonMethodNotAllowed, r.Method+" is not allowed here: GET the backup", 0)
		return
	}
	c, err := h.Conn()
	if err != nil {
		h.Logger.Error("backup: the store did not open", "error", err)
		problem.Write(w, http.StatusServiceUnavailable, ReasonStoreUnavailable, err.Error(), time.Second)
		return
	}
	began := time.Now()
	started := false
	n, err := c.Backup(func(size int64) io.Writer {
		started = true
		hdr := w.Header()
		hdr.Set("Content-Type", "application/octet-stream")
		hdr.Set("Content-Disposition", `attachment; filename="`+StateFile+`"`)
		hdr.Set("Content-Length", strconv.FormatInt(size, 10))
		hdr.Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusOK)
		return w
	})
	switch {
	case errors.Is(err, ErrNotFile):
		problem.Write(w, http.StatusConflict, ReasonStoreNotFile, err.Error(), 0)
	case err != nil && !started:
		h.Logger.Error("backup failed", "error", err)
		problem.Write(w, http.StatusServiceUnavailable, ReasonStoreUnavailable, err.Error(), time.Second)
	case err != nil:
		// The status is sent: the copy is cut short, which its
		// Content-Length tells the client.
		h.Logger.Warn("backup cut short", "bytes", n, "error", err, "by", r.RemoteAddr)
	default:
		h.Logger.Info("store backed up", "bytes", n, "took", time.Since(began), "by", r.RemoteAddr)
	}
}
