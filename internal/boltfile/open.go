// Package boltfile opens and checks the one bbolt file the embedded store
// keeps its state in: the dedupe entries (dedupe/boltstore) and the
// sender's queue (sender/boltqueue) share it. It opens the file with the
// options both rely on, finds a truncated or corrupt file before a
// request reads a broken page (OpenFile, Check), and runs the full check
// in a child process, where a fault or a loop in bbolt's check ends the
// child, not the gateway (CheckInChild).
package boltfile

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Errors of OpenFile and Check. Callers branch on them to give the remedy.
var (
	// ErrLocked means another process holds the file's lock.
	ErrLocked = errors.New("the file is locked by another process")
	// ErrCorrupt means the file is not a sound bbolt file.
	ErrCorrupt = errors.New("the file is corrupt")
)

// OpenFile opens the bbolt file at path, waiting up to timeout for its
// lock, checks that its pages fit in the file, and, with check, checks
// its consistency (Check), so that a corrupt file is an error at start,
// never a panic on the first request that reads a broken page. A lock
// held elsewhere is ErrLocked; a file that does not open or check as
// sound is ErrCorrupt.
//
// Check runs bbolt's check, which walks the pages on a goroutine of its
// own: some damage there is a fault no recover reaches, or a loop. A
// caller that must survive any file checks it in another process first
// (hookgate store check does), then opens it here without check.
func OpenFile(path string, timeout time.Duration, readOnly, check bool) (*bolt.DB, error) {
	// The free page list is written with each commit (bbolt's default):
	// with NoFreelistSync, opening and checking a file rebuild it by a
	// walk of every page on a goroutine of bbolt's own, where a broken
	// page is a panic no recover reaches. The map free list is faster to
	// allocate from.
	db, err := openRecovered(path, Options(timeout, readOnly))
	switch {
	case errors.Is(err, berrors.ErrTimeout):
		return nil, fmt.Errorf("%w: %v", ErrLocked, err)
	case err != nil:
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	// On a failed check the check's error is the one to report; Close
	// only releases the lock and the memory map of a file nobody wrote.
	if err := checkSize(db, path); err != nil {
		_ = db.Close()
		return nil, err
	}
	if check {
		if err := Check(db); err != nil {
			_ = db.Close()
			return nil, err
		}
	}
	return db, nil
}

// Options are the bbolt options of OpenFile.
func Options(timeout time.Duration, readOnly bool) *bolt.Options {
	return &bolt.Options{Timeout: timeout, ReadOnly: readOnly, FreelistType: bolt.FreelistMapType, InitialMmapSize: initialMmapSize}
}

// initialMmapSize is the memory map a file is opened with: address space,
// not memory (the pages the file does not fill are never touched). bbolt
// remaps a file that outgrows its map, and a remap waits for every read
// transaction to end, and every write waits for the remap: one long read
// (a backup, a history export) would hold up every claim, record and
// queue write. Below this size no write ever remaps: 1 GiB (512 MiB on
// 32-bit platforms).
const initialMmapSize = min(1<<30, math.MaxInt/4)

// checkSize finds a truncated file before any page past its end is read:
// bbolt reads pages through a memory map, and a page past the end of the
// file is a SIGBUS that no recover can catch on the goroutine bbolt's check
// runs on.
func checkSize(db *bolt.DB, path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	return db.View(func(tx *bolt.Tx) error {
		if want := tx.Size(); want > fi.Size() {
			return fmt.Errorf("%w: truncated: the file holds %d bytes, its pages reach %d", ErrCorrupt, fi.Size(), want)
		}
		return nil
	})
}

// openRecovered is bolt.Open with its panics (a truncated file can make it
// read a page that is not there) turned into errors.
func openRecovered(path string, opts *bolt.Options) (db *bolt.DB, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			db, err = nil, fmt.Errorf("%v", p)
		}
	}()
	return bolt.Open(path, 0o600, opts)
}

// maxCheckErrors bounds the problems Check reports.
const maxCheckErrors = 5

// Check runs bbolt's consistency check over every page of db. It reads the
// whole file: about a second per gigabyte. A problem found is ErrCorrupt,
// with the first few named.
func Check(db *bolt.DB) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %v", ErrCorrupt, p)
		}
	}()
	var problems []error
	err = db.View(func(tx *bolt.Tx) error {
		for e := range tx.Check() {
			if len(problems) < maxCheckErrors {
				problems = append(problems, e)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %w", ErrCorrupt, errors.Join(problems...))
	}
	return nil
}
