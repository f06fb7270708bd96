package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/hookgate/hookgate/caddymodule"
	"github.com/hookgate/hookgate/reconcile"
)

// defaultReconcileTimeout bounds a run of the command (--timeout).
const defaultReconcileTimeout = 10 * time.Minute

func init() {
	register(caddycmd.Command{
		Name:  "reconcile",
		Usage: "--config <Caddyfile> --job <name> [--repair] [--limit <n>] [--timeout <duration>] [--format table|json] [--address <host:port>]",
		Short: "Compares a source of truth with a receiver's state and reports the drift",
		Long: `
Runs the reconcile job <name> of the config's hookgate option: it streams
both sides in key order and reports the keys the receiver misses, holds in
another state than the truth implies, or holds unknown to the truth. Rows
updated within the job's grace are left out. The exit code is 0 when there
is no drift, 1 when there is (repaired or not: repairs are delivered
asynchronously), and 2 on any error, a usage error included (then nothing
is printed on standard output). --format json prints the report as JSON.
--timeout (default 10m) bounds the whole run, both sources and the
repairs: a run past it is an error.

--repair enqueues, for each missing or mismatched key, the truth row as an
event {"id","type","key","state","version","occurred_at"} through the
running gateway's admin API (--address, default the config's admin address),
to the job's repair destination, under the delivery ID
reconcile:<key>:<state>:<version>: a second run repairs nothing twice. An
ID enqueued before, with this payload or another (the truth row's
updated_at moved, its version did not), is already repaired: not an error,
not counted in "repaired". A key that cannot make a valid delivery ID (1
to 1024 bytes of visible ASCII) is reported as "unrepairable" (a warning on
standard error names it) and not enqueued. --limit (default 1000) bounds
the events newly enqueued; orphans are never repaired.
On a terminal, a progress line on standard error shows the rows compared.
Documentation: docs/reconcile.md, "Reconcile".`,
		CobraFunc: func(cmd *cobra.Command) {
			cmd.Flags().String("config", "", "the Caddyfile (or JSON config) declaring the job")
			cmd.Flags().String("adapter", "", "the config adapter (default: caddyfile for a Caddyfile)")
			cmd.Flags().String("job", "", "the job's name")
			cmd.Flags().String("format", "table", "table or json")
			cmd.Flags().Bool("repair", false, "enqueue corrective events for missing and mismatched keys")
			cmd.Flags().Int("limit", reconcile.DefaultRepairLimit, "with --repair: the most events newly enqueued")
			cmd.Flags().Duration("timeout", defaultReconcileTimeout, "the longest the whole run may take (both sources and the repairs)")
			cmd.Flags().String("address", "", "with --repair: the admin API's host:port (default: the config's admin address)")
			// A usage error is exit 2, as any error: cobra's flag errors
			// would otherwise end in Caddy's exit 1, the drift code.
			cmd.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
				return exit(cmd, 2, fmt.Errorf("%w (see hookgate reconcile --help)", err))
			})
			cmd.RunE = runE(cmdReconcile)
		},
	})
}

// cmdReconcile runs a job and prints its report: exit code 0 when there
// is no drift, 1 when there is, 2 on any error, a usage error included.
func cmdReconcile(cmd *cobra.Command, args []string) (int, error) {
	if len(args) > 0 {
		return 2, fmt.Errorf("unexpected argument %q: name the job with --job", args[0])
	}
	configFile, _ := cmd.Flags().GetString("config")
	adapter, _ := cmd.Flags().GetString("adapter")
	name, _ := cmd.Flags().GetString("job")
	format, _ := cmd.Flags().GetString("format")
	repair, _ := cmd.Flags().GetBool("repair")
	limit, _ := cmd.Flags().GetInt("limit")
	timeout, _ := cmd.Flags().GetDuration("timeout")
	switch {
	case name == "" || configFile == "":
		return 2, fmt.Errorf("--config and --job are required")
	case format != "table" && format != "json":
		return 2, fmt.Errorf("--format %q: want table or json", format)
	case limit < 1:
		return 2, fmt.Errorf("--limit %d: want a positive integer", limit)
	case timeout <= 0:
		return 2, fmt.Errorf("--timeout %s: want a positive duration", timeout)
	}
	raw, _, _, err := caddycmd.LoadConfig(configFile, adapter)
	if err != nil {
		return 2, err
	}
	var cfg struct {
		Admin *struct {
			Listen string `json:"listen"`
		} `json:"admin"`
		Apps struct {
			Hookgate *caddymodule.App `json:"hookgate"`
		} `json:"apps"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return 2, err
	}
	var job *caddymodule.ReconcileJob
	if cfg.Apps.Hookgate != nil {
		for _, j := range cfg.Apps.Hookgate.Reconcile {
			if j.Name == name {
				job = j
			}
		}
	}
	if job == nil {
		return 2, fmt.Errorf("no reconcile job %q in %s", name, configFile)
	}
	opts := reconcile.RunOptions{Timeout: timeout, Bound: "--timeout", Limit: limit}
	if repair {
		if job.Repair == nil {
			return 2, fmt.Errorf("job %s has no repair block", name)
		}
		addr, _ := cmd.Flags().GetString("address")
		if addr == "" && cfg.Admin != nil {
			addr = cfg.Admin.Listen
		}
		opts.Enqueuer, err = reconcile.NewAdminEnqueuer(addr, job.Repair.Destination)
		if err != nil {
			return 2, err
		}
	}
	start := time.Now()
	progress, done := progressLine(cmd.ErrOrStderr(), name)
	opts.Progress = progress
	r, rep, err := job.Job().Run(context.Background(), opts)
	done()
	if err != nil {
		return 2, err
	}
	out := reconcile.NewRunReport(name, r, rep, time.Since(start))
	if rep != nil {
		reconcile.PrintUnrepairable(cmd.ErrOrStderr(), rep)
	}
	out.Print(cmd.OutOrStdout(), format)
	if r.Total() > 0 {
		return 1, nil
	}
	return 0, nil
}

// progressLine returns a progress callback that keeps one line on w up to
// date, five times a second at most, and a func that clears it; both do
// nothing unless w is a terminal.
func progressLine(w io.Writer, job string) (progress func(*reconcile.Report), done func()) {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil, func() {}
	}
	var last time.Time
	progress = func(r *reconcile.Report) {
		if time.Since(last) < 200*time.Millisecond {
			return
		}
		last = time.Now()
		fmt.Fprintf(f, "\r\033[K%s: %d truth and %d receiver rows compared, %d drifts so far", job, r.Compared.Truth, r.Compared.Receiver, r.Total())
	}
	return progress, func() { fmt.Fprint(f, "\r\033[K") }
}
