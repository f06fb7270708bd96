package caddymodule

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/hookgate/hookgate/reconcile"
)

// ReconcileJob compares a source of truth with a receiver's state.
type ReconcileJob struct {
	Name     string           `json:"name"`
	Truth    *ReconcileSource `json:"truth"`
	Receiver *ReconcileSource `json:"receiver"`
	// Expect maps a truth state to the receiver state it implies ("none":
	// the receiver must not hold the key).
	Expect map[string]string `json:"expect,omitempty"`
	// Grace leaves out rows updated within it. Default 2m.
	Grace caddy.Duration `json:"grace,omitempty"`
	// Repair says where corrective events go (`hookgate reconcile
	// --repair`, and each scheduled run).
	Repair *ReconcileRepair `json:"repair,omitempty"`
	// Every runs the job in the gateway on this schedule, under a lock in
	// the state store so that one instance runs each slot. Zero: only the
	// command runs it.
	Every caddy.Duration `json:"every,omitempty"`
}

// ReconcileRepair enqueues a corrective event per missing or mismatched
// key, through the sender.
type ReconcileRepair struct {
	Destination string `json:"destination"`
	// EventType is the event's type; {state} is the truth state. Default
	// "{state}".
	EventType string `json:"event_type,omitempty"`
	// Limit bounds the events a scheduled run newly enqueues. Default 1000.
	Limit int `json:"limit,omitempty"`
}

// ReconcileSource is one side of a job: a PostgreSQL query, or an HTTP
// JSON endpoint. The DSN, URL and header values may be {env.*}
// placeholders, read when the job runs.
type ReconcileSource struct {
	Kind    string            `json:"kind"` // postgres or http
	DSN     string            `json:"dsn,omitempty"`
	Query   string            `json:"query,omitempty"`
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
}

// source builds the reconcile.Source, its placeholders resolved.
func (s *ReconcileSource) source() (reconcile.Source, error) {
	repl := caddy.NewReplacer()
	resolve := func(v string) (string, error) { return repl.ReplaceOrErr(v, true, true) }
	switch s.Kind {
	case "postgres":
		dsn, err := resolve(s.DSN)
		if err != nil {
			return nil, fmt.Errorf("postgres DSN: %w", err)
		}
		return reconcile.Postgres{DSN: dsn, Query: s.Query}, nil
	case "http":
		u, err := resolve(s.URL)
		if err != nil {
			return nil, fmt.Errorf("http URL: %w", err)
		}
		h := http.Header{}
		for k, v := range s.Headers {
			val, err := resolve(v)
			if err != nil {
				return nil, fmt.Errorf("http header %s: %w", k, err)
			}
			h.Set(k, val)
		}
		return reconcile.HTTP{URL: u, Header: h}, nil
	}
	return nil, fmt.Errorf("unknown source %q (want postgres or http)", s.Kind)
}

// unmarshalCaddyfile parses a reconcile block:
//
//	reconcile <name> {
//		truth    postgres <dsn> <query>
//		receiver postgres <dsn> <query>
//		receiver http <url> {
//			header <name> <value>
//		}
//		expect   <truth-state> <receiver-state|none>
//		grace    <duration>
//		every    <duration>
//		repair {
//			destination <name>
//			event_type  <type>
//			limit       <n>
//		}
//	}
func (j *ReconcileJob) unmarshalCaddyfile(d *caddyfile.Dispenser) error {
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		sub := d.Val()
		args := d.RemainingArgs()
		switch sub {
		case "truth", "receiver":
			src := new(ReconcileSource)
			switch {
			case len(args) == 3 && args[0] == "postgres":
				src.Kind, src.DSN, src.Query = "postgres", args[1], args[2]
			case len(args) == 2 && args[0] == "http":
				src.Kind, src.URL = "http", args[1]
				for n := d.Nesting(); d.NextBlock(n); {
					if d.Val() != "header" {
						return d.Errf("unknown http source subdirective %q", d.Val())
					}
					hv := d.RemainingArgs()
					if len(hv) != 2 {
						return d.ArgErr()
					}
					if src.Headers == nil {
						src.Headers = map[string]string{}
					}
					src.Headers[hv[0]] = hv[1]
				}
			default:
				return d.Errf("%s: want postgres <dsn> <query>, or http <url>", sub)
			}
			if sub == "truth" {
				if j.Truth != nil {
					return d.Err("truth given twice")
				}
				j.Truth = src
			} else {
				if j.Receiver != nil {
					return d.Err("receiver given twice")
				}
				j.Receiver = src
			}
		case "expect":
			if len(args) != 2 {
				return d.Errf("expect: want <truth-state> <receiver-state|none>")
			}
			if j.Expect == nil {
				j.Expect = map[string]string{}
			}
			if _, dup := j.Expect[args[0]]; dup {
				return d.Errf("expect %s given twice", args[0])
			}
			j.Expect[args[0]] = args[1]
		case "grace":
			var err error
			if j.Grace, err = positiveDuration(d, sub, args); err != nil {
				return err
			}
		case "every":
			var err error
			if j.Every, err = positiveDuration(d, sub, args); err != nil {
				return err
			}
		case "repair":
			if len(args) != 0 || j.Repair != nil {
				return d.Err("repair: a block, given once")
			}
			j.Repair = new(ReconcileRepair)
			for n := d.Nesting(); d.NextBlock(n); {
				field := d.Val()
				v, err := oneArg(d, d.RemainingArgs())
				if err != nil {
					return err
				}
				switch field {
				case "destination":
					j.Repair.Destination = v
				case "event_type":
					j.Repair.EventType = v
				case "limit":
					n, err := strconv.Atoi(v)
					if err != nil || n < 1 {
						return d.Errf("repair limit %q: want a positive integer", v)
					}
					j.Repair.Limit = n
				default:
					return d.Errf("unknown repair subdirective %q", field)
				}
			}
			if j.Repair.Destination == "" {
				return d.Err("repair needs a destination")
			}
		default:
			return d.Errf("unknown reconcile subdirective %q", sub)
		}
	}
	if j.Truth == nil || j.Receiver == nil {
		return d.Errf("reconcile %s needs a truth and a receiver", j.Name)
	}
	if len(j.Expect) == 0 {
		return d.Errf("reconcile %s needs at least one expect", j.Name)
	}
	return nil
}

// defaultReconcileTimeout bounds a run of the command (--timeout).
const defaultReconcileTimeout = 10 * time.Minute

func init() {
	registerCommand(caddycmd.Command{
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
Documentation: README.md, "Reconcile".`,
		CobraFunc: func(cmd *cobra.Command) {
			cmd.Flags().String("config", "", "the Caddyfile (or JSON config) declaring the job")
			cmd.Flags().String("adapter", "", "the config adapter (default: caddyfile for a Caddyfile)")
			cmd.Flags().String("job", "", "the job's name")
			cmd.Flags().String("format", "table", "table or json")
			cmd.Flags().Bool("repair", false, "enqueue corrective events for missing and mismatched keys")
			cmd.Flags().Int("limit", reconcile.DefaultRepairLimit, "with --repair: the most events newly enqueued")
			cmd.Flags().Duration("timeout", defaultReconcileTimeout, "the longest the whole run may take (both sources and the repairs)")
			cmd.Flags().String("address", "", "with --repair: the admin API's host:port (default: the config's admin address)")
			exit := func(code int, err error) {
				if err != nil {
					fmt.Fprintln(os.Stderr, "Error:", err)
				}
				os.Exit(code)
			}
			// A usage error is exit 2, as any error: cobra's flag errors
			// would otherwise end in Caddy's exit 1, the drift code.
			cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
				exit(2, fmt.Errorf("%w (see hookgate reconcile --help)", err))
				return err
			})
			cmd.RunE = func(cmd *cobra.Command, args []string) error {
				if len(args) > 0 {
					exit(2, fmt.Errorf("unexpected argument %q: name the job with --job", args[0]))
				}
				exit(cmdReconcile(cmd))
				return nil
			}
		},
	})
}

func cmdReconcile(cmd *cobra.Command) (int, error) {
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
			Hookgate *App `json:"hookgate"`
		} `json:"apps"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return 2, err
	}
	var job *ReconcileJob
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
		if addr == "" {
			addr = caddy.DefaultAdminListen
		}
		opts.Enqueuer, err = reconcile.NewAdminEnqueuer(addr, job.Repair.Destination)
		if err != nil {
			return 2, err
		}
	}
	start := time.Now()
	progress, done := progressLine(os.Stderr, name)
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

// progressLine returns a progress callback that keeps one line on f up to
// date, five times a second at most, and a func that clears it; both do
// nothing when f is not a terminal.
func progressLine(f *os.File, job string) (progress func(*reconcile.Report), done func()) {
	if !term.IsTerminal(int(f.Fd())) {
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

// validate checks what the Caddyfile parser checks, for JSON configs.
func (j *ReconcileJob) validate() error {
	switch {
	case j.Name == "":
		return fmt.Errorf("a job needs a name")
	case j.Truth == nil || j.Receiver == nil:
		return fmt.Errorf("needs a truth and a receiver")
	case len(j.Expect) == 0:
		return fmt.Errorf("needs at least one expect")
	case j.Every < 0 || (j.Every > 0 && time.Duration(j.Every) < time.Second):
		return fmt.Errorf("every %s: want at least 1s", time.Duration(j.Every))
	case j.Grace < 0:
		return fmt.Errorf("grace %s: want a positive duration", time.Duration(j.Grace))
	case j.Repair != nil && j.Repair.Destination == "":
		return fmt.Errorf("repair needs a destination")
	case j.Repair != nil && j.Repair.Limit < 0:
		return fmt.Errorf("repair limit %d: want a positive integer", j.Repair.Limit)
	}
	for side, src := range map[string]*ReconcileSource{"truth": j.Truth, "receiver": j.Receiver} {
		switch {
		case src.Kind == "postgres" && (src.DSN == "" || src.Query == ""):
			return fmt.Errorf("%s: postgres needs a DSN and a query", side)
		case src.Kind == "http" && src.URL == "":
			return fmt.Errorf("%s: http needs a URL", side)
		case src.Kind != "postgres" && src.Kind != "http":
			return fmt.Errorf("%s: unknown source %q (want postgres or http)", side, src.Kind)
		}
	}
	return nil
}

// Job is j as a reconcile.Job. At each run it checks j (a JSON config
// gets the Caddyfile parser's checks) and builds the sources, resolving
// their placeholders.
func (j *ReconcileJob) Job() *reconcile.Job {
	rj := &reconcile.Job{Name: j.Name, Expect: j.Expect, Grace: time.Duration(j.Grace)}
	if j.Repair != nil {
		rj.EventType = j.Repair.EventType
	}
	rj.Sources = func() (truth, receiver reconcile.Source, err error) {
		if err := j.validate(); err != nil {
			return nil, nil, err
		}
		if truth, err = j.Truth.source(); err != nil {
			return nil, nil, fmt.Errorf("truth: %w", err)
		}
		if receiver, err = j.Receiver.source(); err != nil {
			return nil, nil, fmt.Errorf("receiver: %w", err)
		}
		return truth, receiver, nil
	}
	return rj
}
