package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hookgate/hookgate/internal/problem"
	"github.com/hookgate/hookgate/internal/store"
)

// newStoreBackupCommand is `hookgate store backup <file>`.
func newStoreBackupCommand() *cobra.Command {
	backup := &cobra.Command{
		Use:   "backup <file>",
		Short: "Writes a consistent copy of a running gateway's embedded store",
		Long: `
backup asks the running gateway's admin API (--address, default
localhost:2019) for a copy of its embedded store (GET ` + store.BackupPath + `):
the file as of one read transaction, taken while the gateway goes on
serving. It writes the copy beside <file>, checks it as "store check" does,
then renames it to <file> (mode 0600; a directory: <file>/` + store.StateFile + `).
To restore, stop the gateway and put the copy in place of its state.db.
A Redis store is refused: back Redis up with its own persistence. The
exit code is 0 when the copy is written and sound, 1 otherwise.
Documentation: README.md, "Backup and restore".`,
		Args: cobra.ExactArgs(1),
		RunE: runE(cmdStoreBackup),
	}
	backup.Flags().String("address", "", adminAddressUsage)
	return backup
}

// cmdStoreBackup fetches the backup into a temporary file beside the
// destination, checks it, and renames it into place: a copy cut short or
// unsound never replaces an earlier backup.
func cmdStoreBackup(cmd *cobra.Command, args []string) (int, error) {
	dest := args[0]
	if fi, err := os.Stat(dest); err == nil && fi.IsDir() {
		dest = filepath.Join(dest, store.StateFile)
	}
	// No client timeout: a large store takes as long as it takes; the
	// Content-Length tells a copy cut short.
	admin, err := adminEndpoint(cmd, 0)
	if err != nil {
		return 1, err
	}
	base := admin.Name
	req, err := http.NewRequest(http.MethodGet, admin.URL(store.BackupPath), nil)
	if err != nil {
		return 1, err
	}
	resp, err := admin.Do(req)
	if err != nil {
		return 1, err
	}
	defer func() { _ = resp.Body.Close() }() // read below
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		var p problem.Details
		if json.Unmarshal(b, &p) == nil && p.Detail != "" {
			return 1, fmt.Errorf("%s (%d %s)", p.Detail, resp.StatusCode, p.Reason)
		}
		return 1, fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	tmp, err := os.CreateTemp(filepath.Dir(dest), "."+filepath.Base(dest)+".*.partial")
	if err != nil {
		return 1, err
	}
	defer func() { _ = os.Remove(tmp.Name()) }() // gone once renamed; else a partial copy
	n, err := io.Copy(tmp, resp.Body)
	if err == nil && resp.ContentLength >= 0 && n != resp.ContentLength {
		err = fmt.Errorf("the copy was cut short: %d of %d bytes", n, resp.ContentLength)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 1, fmt.Errorf("the backup from %s: %w", base, err)
	}
	if _, _, err := checkStore(tmp.Name(), 0); err != nil {
		return 1, errors.Join(errors.New("the copy does not pass the store check; nothing was written to "+dest), err)
	}
	if err := os.Rename(tmp.Name(), dest); err != nil {
		return 1, err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s: %d bytes, a copy of the embedded store of the gateway at %s: sound\n", dest, n, base)
	return 0, nil
}
