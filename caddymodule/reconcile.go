package caddymodule

import (
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/hookgate/hookgate/caddymodule/cfparse"
	"github.com/hookgate/hookgate/internal/zaplog"
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
type ReconcileRepair = reconcile.RepairSpec

// ReconcileSource is one side of a job: a PostgreSQL query, or an HTTP
// JSON endpoint. The DSN, URL and header values may be {env.*}
// placeholders, read when the job runs.
type ReconcileSource = reconcile.SourceSpec

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
	source := func(p **ReconcileSource) cfparse.Sub {
		return func(d *caddyfile.Dispenser) error {
			sub, args := d.Val(), d.RemainingArgs()
			src := new(ReconcileSource)
			*p = src
			switch {
			case len(args) == 3 && args[0] == "postgres":
				src.Kind, src.DSN, src.Query = "postgres", args[1], args[2]
				return nil
			case len(args) != 2 || args[0] != "http":
				return d.Errf("%s: want postgres <dsn> <query>, or http <url>", sub)
			}
			src.Kind, src.URL = "http", args[1]
			return cfparse.ParseBlock(d, "http source", cfparse.Block{
				{"header", func(d *caddyfile.Dispenser) error {
					hv := d.RemainingArgs()
					if len(hv) != 2 {
						return d.ArgErr()
					}
					if src.Headers == nil {
						src.Headers = map[string]string{}
					}
					src.Headers[hv[0]] = hv[1]
					return nil
				}},
			}, "header")
		}
	}
	err := cfparse.ParseBlock(d, "reconcile", cfparse.Block{
		{"truth", source(&j.Truth)},
		{"receiver", source(&j.Receiver)},
		{"expect", func(d *caddyfile.Dispenser) error {
			args := d.RemainingArgs()
			if len(args) != 2 {
				return d.Errf("expect: want <truth-state> <receiver-state|none>")
			}
			if _, dup := j.Expect[args[0]]; dup {
				return d.Errf("expect %s given twice", args[0])
			}
			if j.Expect == nil {
				j.Expect = map[string]string{}
			}
			j.Expect[args[0]] = args[1]
			return nil
		}},
		{"grace", cfparse.Duration(&j.Grace)},
		{"every", cfparse.Duration(&j.Every)},
		{"repair", func(d *caddyfile.Dispenser) error {
			if d.NextArg() {
				return d.ArgErr()
			}
			r := new(ReconcileRepair)
			j.Repair = r
			err := cfparse.ParseBlock(d, "repair", cfparse.Block{
				{"destination", cfparse.String(&r.Destination)},
				{"event_type", cfparse.String(&r.EventType)},
				{"limit", cfparse.Int(&r.Limit)},
			})
			if err == nil && r.Destination == "" {
				return d.Err("repair needs a destination")
			}
			return err
		}},
	}, "expect")
	switch {
	case err != nil:
		return err
	case j.Truth == nil || j.Receiver == nil:
		return d.Errf("reconcile %s needs a truth and a receiver", j.Name)
	case len(j.Expect) == 0:
		return d.Errf("reconcile %s needs at least one expect", j.Name)
	}
	return nil
}

// spec is j as a reconcile.JobSpec.
func (j *ReconcileJob) spec() *reconcile.JobSpec {
	return &reconcile.JobSpec{Name: j.Name, Truth: j.Truth, Receiver: j.Receiver, Expect: j.Expect,
		Grace: time.Duration(j.Grace), Every: time.Duration(j.Every), Repair: j.Repair}
}

// Job is j as a reconcile.Job. At each run it checks j (a JSON config
// gets the Caddyfile parser's checks) and builds the sources, resolving
// their placeholders.
func (j *ReconcileJob) Job() *reconcile.Job {
	repl := caddy.NewReplacer()
	return j.spec().Job(func(v string) (string, error) { return repl.ReplaceOrErr(v, true, true) })
}

// Scheduled reconcile runs (reconcile.Schedule): each job with `every`
// runs in the gateway at the start of every slot, one instance at a time
// under a claim in the state store (reconcile.StoreLocker).

// startSchedules starts a loop per job with `every`.
func (a *App) startSchedules() {
	var schedules []*reconcile.Schedule
	for _, j := range a.Reconcile {
		if j.Every <= 0 {
			continue
		}
		s := &reconcile.Schedule{
			Job:      j.Job(),
			Every:    time.Duration(j.Every),
			Locker:   reconcile.StoreLocker{Store: a.store.Claims("reconcile")},
			Logger:   zaplog.Slog(a.logger),
			Observer: a.metrics.Reconcile(),
		}
		if j.Repair != nil {
			s.Enqueuer = reconcile.SenderEnqueuer{Sender: a, Destination: j.Repair.Destination}
			s.Limit = j.Repair.Limit
		}
		schedules = append(schedules, s)
	}
	if len(schedules) > 0 {
		a.stopSchedules = reconcile.Start(schedules)
	}
}
