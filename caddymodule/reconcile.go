package caddymodule

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/hookgate/hookgate/internal/problem"
	"github.com/hookgate/hookgate/reconcile"
	"github.com/hookgate/hookgate/sender"
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

// reconcileReport is the JSON report.
type reconcileReport struct {
	Job      string `json:"job"`
	Compared struct {
		Truth    int `json:"truth"`
		Receiver int `json:"receiver"`
	} `json:"compared"`
	Drift    map[string]int    `json:"drift"`
	Samples  []reconcileSample `json:"samples"`
	Repaired int               `json:"repaired"`
	// Unrepairable counts, with --repair, the missing or mismatched keys
	// that cannot make a valid delivery ID: reported, never enqueued.
	Unrepairable    int     `json:"unrepairable"`
	DurationSeconds float64 `json:"duration_seconds"`
	// already counts the repairs an earlier run enqueued (table only).
	already int
}

type reconcileSample struct {
	Key           string  `json:"key"`
	Kind          string  `json:"kind"`
	TruthState    *string `json:"truth_state"`
	ReceiverState *string `json:"receiver_state"`
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
	opts := runOptions{Timeout: timeout, Bound: "--timeout", Limit: limit}
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
		opts.Enqueuer, err = newAdminEnqueuer(addr, job.Repair.Destination)
		if err != nil {
			return 2, err
		}
	}
	start := time.Now()
	progress, done := progressLine(os.Stderr, name)
	opts.Progress = progress
	r, rep, err := job.run(context.Background(), opts)
	done()
	if err != nil {
		return 2, err
	}
	out := reconcileReport{Job: name, Drift: map[string]int{}, Samples: []reconcileSample{}, DurationSeconds: time.Since(start).Seconds()}
	out.Compared.Truth, out.Compared.Receiver = r.Compared.Truth, r.Compared.Receiver
	if rep != nil {
		out.Repaired, out.Unrepairable, out.already = rep.Repaired, rep.Unrepairable, rep.Already
		for _, s := range rep.UnrepairableSamples {
			fmt.Fprintf(cmd.ErrOrStderr(), "warning: key %q not repaired: %v\n", s.Key, s.Err)
		}
		if more := rep.Unrepairable - len(rep.UnrepairableSamples); more > 0 {
			fmt.Fprintf(cmd.ErrOrStderr(), "warning: %d more keys not repaired: they cannot make a valid delivery ID\n", more)
		}
	}
	for k, n := range r.Drift {
		out.Drift[string(k)] = n
	}
	for _, d := range r.Samples {
		s := reconcileSample{Key: d.Key, Kind: string(d.Kind)}
		if d.Truth != nil {
			s.TruthState = &d.Truth.State
		}
		if d.Receiver != nil {
			s.ReceiverState = &d.Receiver.State
		}
		out.Samples = append(out.Samples, s)
	}
	sort.SliceStable(out.Samples, func(i, k int) bool { return out.Samples[i].Key < out.Samples[k].Key })
	printReport(cmd.OutOrStdout(), format, out)
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

// compare runs the job's comparison; found, if set, sees each drift, and
// progress, if set, the report so far every 10,000 rows.
func (j *ReconcileJob) compare(ctx context.Context, found func(reconcile.Drift) error, progress func(*reconcile.Report)) (*reconcile.Report, error) {
	if err := j.validate(); err != nil {
		return nil, err
	}
	truth, err := j.Truth.source()
	if err != nil {
		return nil, fmt.Errorf("truth: %w", err)
	}
	recv, err := j.Receiver.source()
	if err != nil {
		return nil, fmt.Errorf("receiver: %w", err)
	}
	grace := time.Duration(j.Grace)
	if grace == 0 {
		grace = 2 * time.Minute
	}
	return reconcile.Compare(ctx, truth, recv, reconcile.Config{Expect: j.Expect, Grace: grace, Progress: progress}, found)
}

// errRunTimeout is the cause of a run stopped at its time limit.
var errRunTimeout = errors.New("the reconcile run timed out")

// runOptions tune one run of a job.
type runOptions struct {
	// Timeout bounds the whole run: both sources and the repairs. Bound
	// names what set it, for the error (--timeout, or the period).
	Timeout time.Duration
	Bound   string
	// Enqueuer, if set, repairs the missing and mismatched keys, at most
	// Limit newly enqueued (default reconcile.DefaultRepairLimit).
	Enqueuer reconcile.Enqueuer
	Limit    int
	// Progress, if set, sees the report so far every 10,000 rows.
	Progress func(*reconcile.Report)
}

// run is one run of the job, the command's and a scheduled one's alike:
// the comparison and, with an Enqueuer, the repairs, through one
// reconcile.Repairer (returned, nil without repairs), all within
// o.Timeout.
func (j *ReconcileJob) run(ctx context.Context, o runOptions) (*reconcile.Report, *reconcile.Repairer, error) {
	if o.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, o.Timeout, errRunTimeout)
		defer cancel()
	}
	var rep *reconcile.Repairer
	var found func(reconcile.Drift) error
	if o.Enqueuer != nil {
		if j.Repair == nil {
			return nil, nil, fmt.Errorf("job %s has no repair block", j.Name)
		}
		rep = &reconcile.Repairer{Enqueuer: o.Enqueuer, EventType: j.Repair.EventType, Limit: o.Limit}
		found = func(d reconcile.Drift) error { return rep.Repair(ctx, d) }
	}
	r, err := j.compare(ctx, found, o.Progress)
	if err != nil && errors.Is(context.Cause(ctx), errRunTimeout) {
		err = fmt.Errorf("%w: it took longer than %s (%s)", errRunTimeout, o.Timeout, o.Bound)
		if r != nil {
			err = fmt.Errorf("%w and stopped after %d truth and %d receiver rows", err, r.Compared.Truth, r.Compared.Receiver)
		}
	}
	return r, rep, err
}

// adminEnqueuer enqueues repair events through a running gateway's admin
// API (POST /hookgate/destinations/<name>/enqueue), as the command does.
type adminEnqueuer struct {
	base        *url.URL
	destination string
	client      *http.Client
}

// newAdminEnqueuer enqueues to destination through the admin API at
// addr, a host:port or a URL.
func newAdminEnqueuer(addr, destination string) (*adminEnqueuer, error) {
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	u, err := url.Parse(strings.TrimSuffix(addr, "/"))
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("--address: want host:port or an http:// URL")
	}
	return &adminEnqueuer{base: u, destination: destination, client: &http.Client{Timeout: 60 * time.Second}}, nil
}

// Enqueue implements reconcile.Enqueuer: a 202 is Enqueued, or
// AlreadyEnqueued when it says duplicate; a 422
// key_reused_with_different_payload is AlreadyEnqueued; a 400 bad_id
// wraps sender.ErrBadID.
func (a *adminEnqueuer) Enqueue(ctx context.Context, e reconcile.Event) (reconcile.Outcome, error) {
	body, err := json.Marshal(map[string]any{
		"id": e.ID, "event_type": e.Type, "entity": e.Entity, "payload": json.RawMessage(e.Payload),
		"event_time": e.EventTime.UTC().Format(time.RFC3339Nano),
	})
	if err != nil {
		return 0, err
	}
	u := a.base.String() + "/hookgate/destinations/" + url.PathEscape(a.destination) + "/enqueue"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.client.Do(req)
	if err != nil {
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err // it quotes the whole URL
		}
		return 0, fmt.Errorf("is the gateway running with its admin API on %s? %w", reconcile.Origin(a.base), err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode < 300 {
		var answer struct {
			Duplicate bool `json:"duplicate"`
		}
		if err := json.Unmarshal(b, &answer); err != nil {
			return 0, fmt.Errorf("the admin API's answer: %w", err)
		}
		if answer.Duplicate {
			return reconcile.AlreadyEnqueued, nil
		}
		return reconcile.Enqueued, nil
	}
	var p problem.Details
	json.Unmarshal(b, &p)
	switch {
	case resp.StatusCode == http.StatusUnprocessableEntity && p.Reason == "key_reused_with_different_payload":
		return reconcile.AlreadyEnqueued, nil
	case resp.StatusCode == http.StatusBadRequest && p.Reason == "bad_id":
		return 0, fmt.Errorf("%w: the admin API answered 400 bad_id: %s", sender.ErrBadID, p.Detail)
	case p.Reason != "":
		return 0, fmt.Errorf("the admin API answered %d %s: %s", resp.StatusCode, p.Reason, p.Detail)
	}
	return 0, fmt.Errorf("the admin API answered %s", resp.Status)
}

// appEnqueuer enqueues repair events through the app's sender, in
// process, as a scheduled run does.
type appEnqueuer struct {
	app         *App
	destination string
}

// Enqueue implements reconcile.Enqueuer: a duplicate, with this payload
// or another, is AlreadyEnqueued.
func (a appEnqueuer) Enqueue(ctx context.Context, e reconcile.Event) (reconcile.Outcome, error) {
	res, err := a.app.Enqueue(ctx, &sender.Envelope{
		ID: e.ID, Destination: a.destination, EventType: e.Type,
		Entity: e.Entity, EventTime: e.EventTime, Payload: e.Payload,
	})
	switch {
	case err != nil:
		return 0, err
	case res.Duplicate || res.Mismatch:
		return reconcile.AlreadyEnqueued, nil
	}
	return reconcile.Enqueued, nil
}

func printReport(w io.Writer, format string, r reconcileReport) {
	if format == "json" {
		b, _ := json.Marshal(r) // one line: a cron log of runs is JSON Lines
		fmt.Fprintln(w, string(b))
		return
	}
	fmt.Fprintf(w, "job %s: compared %d truth rows, %d receiver rows in %.1fs\n", r.Job, r.Compared.Truth, r.Compared.Receiver, r.DurationSeconds)
	fmt.Fprintf(w, "drift: %d missing, %d mismatched, %d orphaned; %d repairs enqueued", r.Drift["missing"], r.Drift["mismatched"], r.Drift["orphaned"], r.Repaired)
	if r.already > 0 {
		fmt.Fprintf(w, ", %d already enqueued by an earlier run", r.already)
	}
	if r.Unrepairable > 0 {
		fmt.Fprintf(w, ", %d unrepairable (no valid delivery ID)", r.Unrepairable)
	}
	fmt.Fprintln(w)
	if len(r.Samples) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tKIND\tTRUTH\tRECEIVER")
	state := func(s *string) string {
		if s == nil {
			return "-"
		}
		return *s
	}
	for _, s := range r.Samples {
		fmt.Fprintln(tw, strings.Join([]string{s.Key, s.Kind, state(s.TruthState), state(s.ReceiverState)}, "\t"))
	}
	tw.Flush()
}
