package cli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/hookgate/hookgate/internal/pathseg"
	"github.com/hookgate/hookgate/sender/httpapi"
)

func init() {
	register(caddycmd.Command{
		Name:  "deliveries",
		Usage: "list|show <destination> <id>|resend|export [--destination <name>] [--event-type <type>] [--entity <id>] [--id <id>]... [--state delivered|dead|queued] [--since <time>] [--until <time>] [--limit <n>] [--dry-run]",
		Short: "Searches, exports and resends the sender's delivery history",
		Long: `
Speaks to a running gateway's admin API (--address, default
$CADDY_ADMIN, else localhost:2019). The history keeps what settled (delivered, and dead)
for the sender's history, newest first. list pages through it; show
prints one delivery, in whatever state it is, with its attempt log, and
its payload and what durable ingress kept of its request ("received":
its source, path and headers, the values of redact_headers masked) while
the payload is kept; export writes every entry the filter matches to
stdout as JSON Lines (with "received" too), page by page, in constant
memory; resend sends a bounded batch again under their own IDs and a new
redrive ID (--limit is required; --dry-run only counts) and prints the
ID, then "hookgate deliveries resend --status <id>" shows its progress.
Filters: --destination, --event-type, --entity (list, export), --id
(list and export: one; resend: repeatable), --state (delivered or dead),
--since and --until (RFC 3339, when it settled).
list and export --state queued list instead what has not settled: the
envelopes queued and leased (in flight), in flight first, then by when
due (due now, then the retries scheduled later): the first --limit
(list's default 50, export's 1000), with no next page ("hookgate
destinations" counts them all). --since and --until do not apply.
--format json prints the admin API's JSON (show and --status print only
JSON, export only JSON Lines). A flag that a subcommand does not use is
an error.
Exit code 0, or 1 on error.
Documentation: docs/sending.md, "Delivery history", at github.com/hookgate/hookgate.`,
		CobraFunc: func(cmd *cobra.Command) {
			addAdminFlags(cmd)
			cmd.Flags().String("destination", "", "only this destination")
			cmd.Flags().String("tenant", "", "only this tenant's destinations")
			cmd.Flags().String("event-type", "", "only this event type")
			cmd.Flags().String("entity", "", "list, export: only this entity")
			cmd.Flags().StringArray("id", nil, "only this delivery ID (resend: repeatable)")
			cmd.Flags().String("state", "", "delivered, dead, or (list, export) queued: not yet settled")
			cmd.Flags().String("since", "", "settled at or after (RFC 3339)")
			cmd.Flags().String("until", "", "settled before (RFC 3339)")
			cmd.Flags().Int("limit", 0, "list, export: page size; resend: the most sent (required)")
			cmd.Flags().String("cursor", "", "list: the next_cursor of the previous page")
			cmd.Flags().Bool("dry-run", false, "resend: count what matches, send nothing")
			cmd.Flags().String("status", "", "resend: show the progress of this redrive ID")
			cmd.Args = cobra.RangeArgs(1, 3)
			cmd.RunE = runE(adminCommand(cmdDeliveries))
		},
	})
}

// historyQuery turns the filter flags into GET /hookgate/deliveries's
// query parameters.
func historyQuery(cmd *cobra.Command) (url.Values, error) {
	q := url.Values{}
	for flag, param := range map[string]string{"destination": "destination", "tenant": "tenant", "event-type": "event_type",
		"entity": "entity", "state": "state", "since": "since", "until": "until"} {
		if v, _ := cmd.Flags().GetString(flag); v != "" {
			q.Set(param, v)
		}
	}
	ids, _ := cmd.Flags().GetStringArray("id")
	switch len(ids) {
	case 0:
	case 1:
		q.Set("id", ids[0])
	default:
		return nil, fmt.Errorf("--id: list and export look up one delivery ID")
	}
	return q, nil
}

// historyFlags are the flags of a search of the history.
var historyFlags = []string{"destination", "tenant", "event-type", "entity", "id", "state", "since", "until"}

// deliveriesFlags are the flags each deliveries subcommand uses; resend
// --status uses only --status.
var deliveriesFlags = map[string][]string{
	"list":   append(slices.Clone(historyFlags), "limit", "cursor", "format"),
	"show":   {"format"},
	"export": append(slices.Clone(historyFlags), "limit", "format"),
	"resend": {"destination", "tenant", "event-type", "id", "state", "since", "until", "limit", "dry-run", "format"},
}

func cmdDeliveries(cmd *cobra.Command, args []string) error {
	uses, ok := deliveriesFlags[args[0]]
	if status, _ := cmd.Flags().GetString("status"); status != "" && args[0] == "resend" {
		uses = []string{"status", "format"}
	}
	if !ok {
		return fmt.Errorf("unknown deliveries command %q: want list, show, resend or export", args[0])
	}
	if args[0] != "show" && len(args) > 1 {
		return fmt.Errorf("deliveries %s takes no argument: filter with flags", args[0])
	}
	if err := onlyFlags(cmd, args[0], uses...); err != nil {
		return err
	}
	var err error
	switch {
	case args[0] == "export":
		err = jsonOnly(cmd, args[0], "JSON Lines")
	case args[0] == "show" || slices.Contains(uses, "status"):
		err = jsonOnly(cmd, args[0], "JSON")
	}
	if err != nil {
		return err
	}
	c, err := newAdminClient(cmd)
	if err != nil {
		return err
	}
	switch args[0] {
	case "list":
		q, err := historyQuery(cmd)
		if err != nil {
			return err
		}
		var v httpapi.DeliveriesPage
		if ok, err := c.page(cmd, "/hookgate/deliveries", q, &v); !ok {
			return err
		}
		if state, _ := cmd.Flags().GetString("state"); state == "queued" {
			c.queued(cmd, v.Entries)
			return nil
		}
		if len(v.Entries) == 0 {
			// The search looks at a bounded number of entries a page:
			// "none" is the answer only at the end.
			if v.NextCursor == "" {
				fmt.Fprintln(c.out, "no delivery matches")
				return nil
			}
			fmt.Fprintln(c.out, "none of the newest entries looked at match; older ones may")
			c.more(v.NextCursor)
			return nil
		}
		var rows [][]string
		for _, e := range v.Entries {
			rows = append(rows, []string{e.ID, e.Destination, e.EventType, dash(e.Entity), string(e.State),
				fmt.Sprint(e.LastStatus), fmt.Sprint(e.Attempts), e.SettledAt.Format(time.RFC3339)})
		}
		c.table("ID\tDESTINATION\tTYPE\tENTITY\tSTATE\tSTATUS\tATTEMPTS\tSETTLED AT", rows)
		c.more(v.NextCursor)
	case "show":
		if len(args) != 3 {
			return fmt.Errorf("show needs a destination and a delivery ID")
		}
		raw, err := c.call(http.MethodGet, "/hookgate/deliveries/"+pathseg.Escape(args[1])+"/"+pathseg.Escape(args[2]), nil, nil)
		if err != nil {
			return err
		}
		c.printJSON(raw) // an envelope reads best as JSON
	case "export":
		return c.export(cmd)
	case "resend":
		if named, err := c.redriveStatus(cmd); named {
			return err
		}
		in := resendBody(cmd)
		return c.batch("/hookgate/deliveries/resend", &in, &in.Limit, in.DryRun, batchWords{
			name: "resend", noLimit: "send a bounded batch, then watch it",
			matchOne: "delivery matches", matchMany: "deliveries match", untouched: "nothing sent",
			none:  "no delivery whose payload is kept matches; nothing sent",
			moved: "queued to be sent again", statusHint: "hookgate deliveries resend",
		})
	}
	return nil
}

// queuedState is an unsettled envelope's state, and the head it waits
// behind under ordering entity: "queued, behind <id>", or "queued, held
// behind <id>" when that head is a dead letter that holds its entity.
func queuedState(e httpapi.DeliveryEntry) string {
	switch {
	case e.Behind == "":
		return string(e.State)
	case e.Held:
		return string(e.State) + ", held behind " + e.Behind
	}
	return string(e.State) + ", behind " + e.Behind
}

// queued prints a list of envelopes not yet settled: when each was
// created rather than settled, and, when the list is full, where to count
// them all (the list has no next page).
func (c *adminClient) queued(cmd *cobra.Command, entries []httpapi.DeliveryEntry) {
	if len(entries) == 0 {
		fmt.Fprintln(c.out, "nothing queued matches")
		return
	}
	var rows [][]string
	for _, e := range entries {
		rows = append(rows, []string{e.ID, e.Destination, e.EventType, dash(e.Entity), queuedState(e),
			fmt.Sprint(e.LastStatus), fmt.Sprint(e.Attempts), e.CreatedAt.Format(time.RFC3339)})
	}
	c.table("ID\tDESTINATION\tTYPE\tENTITY\tSTATE\tSTATUS\tATTEMPTS\tCREATED AT", rows)
	limit, _ := cmd.Flags().GetInt("limit")
	if limit <= 0 {
		limit = listPage
	}
	if len(entries) >= limit {
		fmt.Fprintf(c.out, "the first %d due; 'hookgate destinations' counts them all\n", len(entries))
	}
}

// listPage is the admin API's page size when --limit does not say.
const listPage = 50

// exportPage is export's page size unless --limit says.
const exportPage = 1000

// export writes every entry the filter matches as JSON Lines, one page of
// the admin API at a time: what it holds is one page, however many match.
func (c *adminClient) export(cmd *cobra.Command) error {
	q, err := historyQuery(cmd)
	if err != nil {
		return err
	}
	limit, _ := cmd.Flags().GetInt("limit")
	if limit <= 0 {
		limit = exportPage
	}
	q.Set("limit", fmt.Sprint(limit))
	// Each line carries what durable ingress kept of the request, as
	// show does: the export is the history's record.
	q.Set("received", "true")
	w := bufio.NewWriter(c.out)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for cursor := ""; ; {
		q.Set("cursor", cursor)
		var v httpapi.DeliveriesPage
		if _, err := c.call(http.MethodGet, "/hookgate/deliveries?"+q.Encode(), nil, &v); err != nil {
			_ = w.Flush() // what was read is written before the error
			return err
		}
		for _, e := range v.Entries {
			if err := enc.Encode(e); err != nil {
				return err
			}
		}
		if err := w.Flush(); err != nil {
			return err
		}
		if v.NextCursor == "" {
			return nil
		}
		cursor = v.NextCursor
	}
}

func resendBody(cmd *cobra.Command) httpapi.ResendRequest {
	var in httpapi.ResendRequest
	in.Destination, _ = cmd.Flags().GetString("destination")
	in.Tenant, _ = cmd.Flags().GetString("tenant")
	in.EventType, _ = cmd.Flags().GetString("event-type")
	in.State, _ = cmd.Flags().GetString("state")
	in.Since, _ = cmd.Flags().GetString("since")
	in.Until, _ = cmd.Flags().GetString("until")
	in.IDs, _ = cmd.Flags().GetStringArray("id")
	in.Limit, _ = cmd.Flags().GetInt("limit")
	in.DryRun, _ = cmd.Flags().GetBool("dry-run")
	in.By = "cli: " + cliUser()
	return in
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// plural is one when n is 1, else many.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
