package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/hookgate/hookgate/caddymodule/cfparse"
	"github.com/hookgate/hookgate/dedupe/freshness"
	"github.com/hookgate/hookgate/internal/forward"
	"github.com/hookgate/hookgate/internal/outage"
	"github.com/hookgate/hookgate/internal/problem"
	"github.com/hookgate/hookgate/internal/reqbody"
	"github.com/hookgate/hookgate/internal/telemetry"
)

func init() {
	caddy.RegisterModule(Freshness{})
	httpcaddyfile.RegisterHandlerDirective("webhook_freshness", parseHandler[Freshness])
	// Freshness runs right after dedupe (before push), so a duplicate is
	// replayed before any freshness question is asked.
	httpcaddyfile.RegisterDirectiveOrder("webhook_freshness", httpcaddyfile.Before, "push")
}

// Freshness is the webhook_freshness handler: it judges each event by its
// own time (or sequence number) against the newest event already applied
// to the same entity, and forwards only fresh ones, one at a time per
// entity. The watermark moves only when the upstream answers 2xx.
type Freshness struct {
	// Entity is the entity the event is about, a placeholder such as
	// {webhook.json.reservation_id}. Required.
	Entity string `json:"entity,omitempty"`

	// EventTime is the event's time, a placeholder resolving to RFC 3339 or
	// unix seconds. Exactly one of EventTime and Sequence is required.
	EventTime string `json:"event_time,omitempty"`

	// Sequence is the event's sequence number, a placeholder resolving to a
	// non-negative integer (a JSON number or a decimal string), monotonic
	// per entity.
	Sequence string `json:"sequence,omitempty"`

	// MaxAge makes an event stale (too_old) when its own time is older,
	// whatever its arrival time. Event times only; default: no limit.
	MaxAge caddy.Duration `json:"max_age,omitempty"`

	// OnStale is the answer to a stale event: "ack" (200
	// {"status":"stale","reason":...}, so the sender stops retrying and
	// webhook_dedupe records it) or "reject" (409). Default ack.
	OnStale string `json:"on_stale,omitempty"`

	// EntityBusy is what an event gets while another event of its entity
	// is being forwarded: "wait" (up to EntityBusyWait) or "reject" (409
	// entity_busy with Retry-After at once). Default wait.
	EntityBusy string `json:"entity_busy,omitempty"`

	// EntityBusyWait is how long "wait" waits. Default 5s.
	EntityBusyWait caddy.Duration `json:"entity_busy_wait,omitempty"`

	// Lease bounds the hold of an entity while its event is forwarded.
	// Default 30s.
	Lease caddy.Duration `json:"lease,omitempty"`

	// Retention is how long an entity's watermark is kept after it last
	// moved: longer than any event can be delayed. Default 720h.
	Retention caddy.Duration `json:"retention,omitempty"`

	fresh    *freshness.Freshness
	now      func() time.Time
	metrics  *telemetry.Metrics
	logger   *zap.Logger
	storeLog *outage.Log
}

// CaddyModule returns the Caddy module information.
func (Freshness) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.webhook_freshness",
		New: func() caddy.Module { return new(Freshness) },
	}
}

// Provision sets up the handler.
func (h *Freshness) Provision(ctx caddy.Context) error {
	h.logger = ctx.Logger()
	if h.OnStale == "" {
		h.OnStale = "ack"
	}
	if h.EntityBusy == "" {
		h.EntityBusy = "wait"
	}
	if h.now == nil {
		h.now = time.Now
	}
	h.storeLog = outage.NewLog(h.logger, "freshness", h.now)
	if err := h.validate(); err != nil {
		return err
	}
	app, err := appFrom(ctx)
	if err != nil {
		return err
	}
	h.metrics = app.metrics
	h.fresh, err = freshness.New(app.useStore(), freshness.Config{
		MaxAge:    time.Duration(h.MaxAge),
		Wait:      waitFor(h.EntityBusy, &h.EntityBusyWait),
		Lease:     time.Duration(h.Lease),
		Retention: time.Duration(h.Retention),
	}, freshness.WithClock(h.now))
	return err
}

func (h *Freshness) validate() error {
	switch {
	case h.Entity == "":
		return errors.New("entity is required")
	case (h.EventTime == "") == (h.Sequence == ""):
		return errors.New("exactly one of event_time and sequence is required")
	case h.MaxAge != 0 && h.Sequence != "":
		return errors.New("max_age judges event times: it needs event_time, not sequence")
	case h.OnStale != "" && h.OnStale != "ack" && h.OnStale != "reject":
		return fmt.Errorf("on_stale %q: want ack or reject", h.OnStale)
	case h.EntityBusy != "" && h.EntityBusy != "wait" && h.EntityBusy != "reject":
		return fmt.Errorf("entity_busy %q: want wait <duration> or reject", h.EntityBusy)
	case h.EntityBusy == "reject" && h.EntityBusyWait != 0:
		return errors.New("entity_busy_wait needs entity_busy wait")
	case h.MaxAge < 0 || h.Lease < 0 || h.Retention < 0 || h.EntityBusyWait < 0:
		return errors.New("durations must not be negative")
	}
	return nil
}

// ServeHTTP judges the event and forwards it, or answers it as stale.
func (h *Freshness) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	ctx, span := telemetry.StartSpan(r.Context(), "webhook_freshness")
	defer span.End()
	count := func(result string) { h.metrics.FreshnessResult(span, result) }
	reject := func(reason problem.Reason, detail string) error {
		count(reason.Code)
		problem.Write(w, reason, detail, 0)
		return nil
	}

	// The body an earlier handler read is used as is; alone, freshness
	// reads it itself, so that {webhook.json.*} resolves.
	r, _, err := bufferBody(withContext(r, ctx), DefaultMaxBody)
	if err != nil {
		count(reqbody.WriteRejection(w, err))
		return nil
	}
	ctx = r.Context()
	repl := ctx.Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	// Every placeholder must resolve: an unknown or empty one would leave
	// one literal entity (or time) shared by every request.
	entity, err := repl.ReplaceOrErr(h.Entity, true, true)
	if err != nil {
		return reject(problem.MissingEntity, "the entity "+h.Entity+" resolves to nothing: "+err.Error())
	}
	if len(entity) > freshness.MaxEntityLen {
		return reject(problem.EntityTooLong, fmt.Sprintf("the entity is %d bytes, over %d", len(entity), freshness.MaxEntityLen))
	}
	mark, rej, detail := h.mark(repl)
	if rej != (problem.Reason{}) {
		return reject(rej, detail)
	}
	judgement, err := h.fresh.Check(ctx, entity, mark)
	switch {
	case errors.Is(err, freshness.ErrEventInFuture):
		// Judged by this instance's clock: a copy arriving later may be
		// judged otherwise, so webhook_dedupe never records this answer.
		forward.MarkNotFinal(w)
		return reject(problem.EventTimeInFuture, err.Error())
	case err != nil && ctx.Err() != nil:
		// The client left, or the enclosing dedupe's lease ended, while
		// this event waited for its entity: not applied, retry later.
		count(freshness.ResultBusy)
		forward.MarkNotFinal(w)
		problem.Write(w, problem.EntityBusy, "the wait for this entity ended", time.Second)
		return nil
	case err != nil:
		count("store_error")
		h.storeLog.Failed(err, zap.String("entity", entity))
		problem.Write(w, problem.StoreUnavailable, "the freshness store is unavailable; nothing was forwarded", time.Second)
		return nil
	}
	h.storeLog.Answered()

	switch judgement.Result {
	case freshness.ResultSuperseded, freshness.ResultTooOld:
		count(judgement.Result)
		if h.OnStale == "reject" {
			rej, detail := h.fresh.Stale(judgement)
			forward.MarkNotFinal(w) // each retry is judged afresh
			problem.Write(w, rej, detail, 0)
			return nil
		}
		freshness.WriteStaleAck(w, judgement.Result)
		return nil
	case freshness.ResultBusy:
		count(judgement.Result)
		forward.MarkNotFinal(w)
		problem.Write(w, problem.EntityBusy, "another event of this entity is being applied", max(judgement.LeaseUntil.Sub(h.now()), time.Nanosecond))
		return nil
	}

	// Fresh: forward, and move the watermark if the upstream applied it.
	// The forward is detached from the client (the upstream may act even if
	// the client leaves) and ends a margin before the entity's lease, so no
	// other event of the entity can be forwarded alongside it. Inside
	// webhook_dedupe, the problem a panic below is answered with is seen
	// there as a 502 (nothing received: its claim is released); a status
	// already sent aborts, and dedupe records it.
	return forward.Send(w, r, next, forward.Config{
		LeaseUntil: judgement.LeaseUntil,
		Lease:      h.fresh.Lease(),
	}, func(detached context.Context, res *forward.Result) {
		// A 2xx received is applied, even when the copy of its body failed
		// afterwards: the upstream decided.
		applied := res.Status >= 200 && res.Status < 300
		if applied {
			count(freshness.ResultApplied)
		} else {
			count("not_applied")
		}
		// The watermark write is retried until the entity's lease ends (and
		// for a moment at least).
		done, cancelDone := context.WithDeadline(detached, res.SettleDeadline())
		derr := h.fresh.Done(done, entity, judgement.Token, mark, applied)
		cancelDone()
		if derr != nil {
			h.logger.Error("freshness: finishing the event failed until its lease ended",
				zap.String("entity", entity), zap.Bool("applied", applied), zap.Error(derr))
		}
	})
}

// mark resolves the event's mark, by its time or its sequence number, or
// the reason it has none.
func (h *Freshness) mark(repl *caddy.Replacer) (freshness.Mark, problem.Reason, string) {
	if h.EventTime != "" {
		raw, err := repl.ReplaceOrErr(h.EventTime, true, true)
		if err != nil {
			return freshness.Mark{}, problem.MissingEventTime, "the event time " + h.EventTime + " resolves to nothing: " + err.Error()
		}
		t, err := freshness.ParseEventTime(raw)
		if err != nil {
			return freshness.Mark{}, problem.MalformedEventTime, err.Error()
		}
		return freshness.TimeMark(t), problem.Reason{}, ""
	}
	raw, err := repl.ReplaceOrErr(h.Sequence, true, true)
	if err != nil {
		return freshness.Mark{}, problem.MissingSequence, "the sequence " + h.Sequence + " resolves to nothing: " + err.Error()
	}
	seq, err := freshness.ParseSequence(raw)
	if err != nil {
		return freshness.Mark{}, problem.MalformedSequence, err.Error()
	}
	return freshness.SequenceMark(seq), problem.Reason{}, ""
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens. Syntax:
//
//	webhook_freshness {
//		entity      <placeholder>
//		event_time  <placeholder>
//		sequence    <placeholder>
//		max_age     <duration>
//		on_stale    ack|reject
//		entity_busy wait <duration>|reject
//		lease       <duration>
//		retention   <duration>
//	}
//
// entity and one of event_time and sequence are required.
func (h *Freshness) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	err := cfparse.Directive(d, nil, "webhook_freshness", cfparse.Block{
		{"entity", cfparse.String(&h.Entity)},
		{"event_time", cfparse.String(&h.EventTime)},
		{"sequence", cfparse.String(&h.Sequence)},
		{"on_stale", cfparse.String(&h.OnStale)},
		{"max_age", cfparse.Duration(&h.MaxAge)},
		{"lease", cfparse.Duration(&h.Lease)},
		{"retention", cfparse.Duration(&h.Retention)},
		{"entity_busy", waitOr("reject", &h.EntityBusy, &h.EntityBusyWait)},
	})
	if err != nil {
		return err
	}
	return h.validate()
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Freshness)(nil)
	_ caddyhttp.MiddlewareHandler = (*Freshness)(nil)
	_ caddyfile.Unmarshaler       = (*Freshness)(nil)
)
