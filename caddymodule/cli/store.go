package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/hookgate/hookgate/internal/store"
)

func init() {
	register(caddycmd.Command{
		Name:  "store",
		Usage: "check [<file or directory>] | backup <file>",
		Short: "Checks the embedded store's file for corruption, or backs up a running gateway's",
		Long: `
backup writes a consistent copy of a running gateway's embedded store
through its admin API (see hookgate store backup --help).

check runs bbolt's consistency check over every page of the embedded store's
file (state.db), read-only. Run it on a stopped gateway's file: a running
gateway holds the file's lock (back a running gateway up with "store
backup", which checks the copy). The argument is the file, or the directory
of "store file <dir>"; the default is the default store's file,
hookgate/state.db in Caddy's data directory (` + "`$XDG_DATA_HOME/caddy`" + `, by
default ~/.local/share/caddy). The exit code is 0 when the file
is sound, 1 otherwise. The check runs in a child process: damage that
crashes it, or makes it loop past --timeout, is reported as corruption.
Documentation: docs/operations.md, "The embedded store".`,
		CobraFunc: func(cmd *cobra.Command) {
			check := &cobra.Command{
				Use:   "check [<file or directory>]",
				Short: "Checks the embedded store's file for corruption",
				Args:  cobra.MaximumNArgs(1),
				RunE:  runE(cmdStoreCheck),
			}
			check.Flags().Duration("timeout", 0, "give up, and call the file corrupt, after this long (default a minute, and 30s per GiB)")
			cmd.AddCommand(check, newStoreBackupCommand())
		},
	})
}

// cmdStoreCheck checks the store file (the argument, else the default
// store's) and prints which file it checked and what it found: exit code
// 0 when it is sound or empty, else 1 and the error, unprefixed.
func cmdStoreCheck(cmd *cobra.Command, args []string) (int, error) {
	path := filepath.Join(caddy.AppDataDir(), "hookgate", store.StateFile)
	if len(args) == 1 {
		path = args[0]
	}
	limit, _ := cmd.Flags().GetDuration("timeout")
	path, verdict, err := checkStore(path, limit)
	if err != nil {
		fmt.Fprintln(cmd.ErrOrStderr(), err)
		return 1, nil
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s: %s\n", path, verdict)
	return 0, nil
}

// checkStore checks the store file at path (or state.db in the
// directory path), in a child process given up to limit, and says which
// file it checked and what it found: sound, or empty (a new store, which
// hookgate initialises).
func checkStore(path string, limit time.Duration) (string, string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return path, "", fmt.Errorf("store file: %w", err)
	}
	if fi.IsDir() {
		path = filepath.Join(path, store.StateFile)
		if fi, err = os.Stat(path); err != nil {
			return path, "", fmt.Errorf("store file: %w", err)
		}
	}
	if fi.Size() == 0 {
		return path, "empty (a new store: hookgate initialises it at start)", nil
	}
	if err := store.CheckStateFile(path, limit); err != nil {
		return path, "", err
	}
	return path, "sound", nil
}
