package sender

import "context"

// History lists the settled envelopes q matches, newest first across its
// destinations, a page after cursor (see DLQ.History).
func (o *Ops) History(ctx context.Context, q HistoryQuery, cursor string, limit int) ([]*Meta, string, error) {
	return o.dlq.History(ctx, q, cursor, limit)
}

// Resend sends again up to limit of the settled envelopes q matches,
// under a new redrive ID (a dry run only counts), then wakes the
// workers; it is logged and counted as a redrive is.
func (o *Ops) Resend(ctx context.Context, q HistoryQuery, limit int, by string, dryRun bool) (*Redrive, error) {
	rd, err := o.dlq.Resend(ctx, q, limit, by, dryRun)
	if rd != nil && rd.Moved > 0 {
		if o.opts.Redriven != nil {
			o.opts.Redriven(ctx, rd.Letters)
		}
		o.logger.Info("resend", withError([]any{"redrive_id", rd.ID, "matched", rd.Matched,
			"moved", rd.Moved, "by", by}, err)...)
		for _, d := range o.sender.Destinations() {
			o.sender.Wake(d)
		}
	}
	return rd, err
}
