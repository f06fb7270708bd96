package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/hookgate/hookgate/internal/adminclient"
	"github.com/hookgate/hookgate/internal/store"
)

// newStoreBackupCommand is `hookgate store backup <file>`.
func newStoreBackupCommand() *cobra.Command {
	backup := &cobra.Command{
		Use:   "backup <file>",
		Short: "Writes a consistent copy of a running gateway's embedded store",
		Long: `
backup asks the running gateway's admin API (--address, default $CADDY_ADMIN, else
localhost:2019) for a copy of its embedded store (GET ` + store.BackupPath + `):
the file as of one read transaction, copied beside the gateway's file while
the gateway goes on serving, then downloaded. It writes the copy beside
<file>, checks it as "store check" does, then renames it to <file> (mode
0600; a directory: <file>/` + store.StateFile + `). A copy cut short, empty,
unsound, stalled (nothing received for --stall) or interrupted (Ctrl-C)
never replaces an earlier backup, and leaves no temporary file.
To restore, stop the gateway and put the copy in place of its state.db.
A Redis store is refused: back Redis up with its own persistence. The
exit code is 0 when the copy is written and sound, 1 otherwise.
Documentation: docs/operations.md, "Backup and restore".`,
		Args: cobra.ExactArgs(1),
		RunE: runE(cmdStoreBackup),
	}
	backup.Flags().String("address", "", adminAddressUsage)
	backup.Flags().Duration("stall", 2*time.Minute, "give up when the gateway sends nothing for this long (its local copy comes first: about 5s per GiB)")
	return backup
}

// errStalled ends a download that sent nothing for the --stall limit.
var errStalled = errors.New("stalled")

// cmdStoreBackup fetches the backup into a temporary file beside the
// destination, checks it, and renames it into place: a copy cut short,
// empty, unsound, stalled or interrupted (SIGINT, SIGTERM) never replaces
// an earlier backup, and its temporary file is removed.
func cmdStoreBackup(cmd *cobra.Command, args []string) (int, error) {
	dest := args[0]
	if fi, err := os.Stat(dest); err == nil && fi.IsDir() {
		dest = filepath.Join(dest, store.StateFile)
	}
	// No client timeout: a large store takes as long as it takes; the
	// stall limit ends a download that stops.
	admin, err := adminEndpoint(cmd, 0)
	if err != nil {
		return 1, err
	}
	stall, _ := cmd.Flags().GetDuration("stall")
	if stall <= 0 {
		return 1, fmt.Errorf("--stall %s: want a positive duration", stall)
	}
	dir := filepath.Dir(dest)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return 1, fmt.Errorf("the directory %s does not exist: store backup makes none; create it first", dir)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(dest)+".*.partial")
	if err != nil {
		return 1, fmt.Errorf("cannot write in the directory %s: %w", dir, errors.Unwrap(err))
	}
	defer func() { _ = os.Remove(tmp.Name()) }() // gone once renamed; else a partial copy
	defer func() { _ = tmp.Close() }()           // closed below; again on an early return

	interrupted, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	ctx, cancel := context.WithCancelCause(interrupted)
	defer cancel(nil)
	timer := time.AfterFunc(stall, func() { cancel(errStalled) }) // reset by every byte received
	n, err := fetchBackup(ctx, admin, tmp, stallReset{timer, stall})
	timer.Stop()
	if err != nil && errors.Is(context.Cause(ctx), errStalled) {
		err = fmt.Errorf("no data from the gateway for %s (--stall): the backup was abandoned", stall)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		if _, _, cerr := checkStore(tmp.Name(), 0); cerr != nil {
			err = errors.Join(errors.New("the copy does not pass the store check"), cerr)
		}
	}
	if interrupted.Err() != nil { // whatever failed then: a Ctrl-C also ends the check's child
		err = errors.New("interrupted")
	}
	if err == nil {
		err = os.Rename(tmp.Name(), dest)
	}
	if err != nil {
		return 1, fmt.Errorf("%w\n%s is left as it was", err, dest)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s: %d bytes, a copy of the embedded store of the gateway at %s: sound\n", dest, n, admin.Name)
	return 0, nil
}

// stallReset resets a stall timer at every byte received.
type stallReset struct {
	timer *time.Timer
	limit time.Duration
}

func (s stallReset) Write(p []byte) (int, error) {
	s.timer.Reset(s.limit)
	return len(p), nil
}

// fetchBackup asks the gateway at admin for a backup and writes it to w,
// each chunk also to progress; it returns the bytes written. A refusal is
// an error with the problem's detail; so is an empty answer, and one
// shorter than its Content-Length.
func fetchBackup(ctx context.Context, admin *adminclient.Endpoint, w io.Writer, progress io.Writer) (int64, error) {
	base := admin.Name
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, admin.URL(store.BackupPath), nil)
	if err != nil {
		return 0, err
	}
	// No overall timeout: a large store takes as long as it takes; the
	// stall limit ends a download that stops.
	resp, err := admin.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }() // read below
	if err := adminclient.ErrorOf(resp); err != nil {
		return 0, err
	}
	n, err := io.Copy(io.MultiWriter(w, progress), resp.Body)
	switch {
	case err != nil:
		return n, fmt.Errorf("the backup from %s: %w", base, err)
	case resp.ContentLength >= 0 && n != resp.ContentLength:
		return n, fmt.Errorf("the backup from %s was cut short: %d of %d bytes", base, n, resp.ContentLength)
	case n == 0:
		return n, fmt.Errorf("the gateway at %s answered an empty copy", base)
	}
	return n, nil
}
