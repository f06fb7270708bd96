package cli

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/user"
	"slices"
	"strings"
	"time"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/hookgate/hookgate/internal/pathseg"
	"github.com/hookgate/hookgate/internal/problem"
	"github.com/hookgate/hookgate/sender"
	"github.com/hookgate/hookgate/sender/httpapi"
)

func init() {
	register(caddycmd.Command{
		Name:  "dlq",
		Usage: "summary|list|show <id>|redrive|purge [--destination <name>] [--class <class>] [--since <time>] [--until <time>] [--id <id>]... [--limit <n>] [--dry-run] [--all]",
		Short: "Inspects, redrives and purges the sender's dead letters",
		Long: `
Speaks to a running gateway's admin API (--address, default
$CADDY_ADMIN, else localhost:2019). summary groups dead letters by destination and error
class; list pages through them; show prints one with its attempt log,
and what durable ingress kept of its request ("received": its source,
path and headers, the values of redact_headers masked); redrive moves
a bounded batch back to the queue under a new redrive ID (--limit is
required; --dry-run only counts) and prints the ID, then
"hookgate dlq redrive --status <id>" shows its progress; purge deletes a
bounded batch, the oldest first (--limit is required unless --id names
the letters; --dry-run only counts; with no filter it needs --all).
Filters: --destination, --class (network, timeout, http_5xx, http_4xx,
http_3xx, gone, request), --since and --until (RFC 3339), --id (repeatable).
--format json prints the admin API's JSON (show and --status print only
JSON). A flag that a subcommand does not use is an error.
Exit code 0, or 1 on error.
Documentation: docs/sending.md, "Dead letters", at github.com/hookgate/hookgate.`,
		CobraFunc: func(cmd *cobra.Command) {
			addAdminFlags(cmd)
			cmd.Flags().String("destination", "", "only this destination")
			cmd.Flags().String("tenant", "", "only this tenant's destinations")
			cmd.Flags().String("class", "", "only this error class")
			cmd.Flags().String("since", "", "dead at or after (RFC 3339)")
			cmd.Flags().String("until", "", "dead before (RFC 3339)")
			cmd.Flags().StringArray("id", nil, "only this delivery ID (repeatable)")
			cmd.Flags().Int("limit", 0, "list: page size; redrive: the most moved (required); purge: the most removed")
			cmd.Flags().String("cursor", "", "list: the next_cursor of the previous page")
			cmd.Flags().Bool("dry-run", false, "redrive, purge: count what matches, change nothing")
			cmd.Flags().Bool("all", false, "purge: every dead letter (a purge with no filter needs it)")
			cmd.Flags().String("status", "", "redrive: show the progress of this redrive ID")
			cmd.Args = cobra.RangeArgs(1, 2)
			cmd.RunE = runE(adminCommand(cmdDLQ))
		},
	})
}

// filterQuery turns the filter flags into query parameters.
func filterQuery(cmd *cobra.Command) url.Values {
	q := url.Values{}
	for _, name := range []string{"destination", "tenant", "class", "since", "until"} {
		if v, _ := cmd.Flags().GetString(name); v != "" {
			q.Set(name, v)
		}
	}
	ids, _ := cmd.Flags().GetStringArray("id")
	for _, id := range ids {
		q.Add("id", id)
	}
	return q
}

// filterFlags are the flags of a dead-letter filter.
var filterFlags = []string{"destination", "tenant", "class", "since", "until", "id"}

// dlqFlags are the flags each dlq subcommand uses; redrive --status uses
// only --status.
var dlqFlags = map[string][]string{
	"summary": append(slices.Clone(filterFlags), "format"),
	"list":    append(slices.Clone(filterFlags), "limit", "cursor", "format"),
	"show":    {"destination", "format"},
	"redrive": append(slices.Clone(filterFlags), "limit", "dry-run", "format"),
	"purge":   append(slices.Clone(filterFlags), "limit", "dry-run", "all", "format"),
}

func cmdDLQ(cmd *cobra.Command, args []string) error {
	uses, ok := dlqFlags[args[0]]
	if status, _ := cmd.Flags().GetString("status"); status != "" && args[0] == "redrive" {
		uses = []string{"status", "format"}
	}
	switch {
	case !ok:
		return fmt.Errorf("unknown dlq command %q: want summary, list, show, redrive or purge", args[0])
	case args[0] == "show" && len(args) != 2:
		return fmt.Errorf("show needs a delivery ID")
	case args[0] != "show":
		if err := noArgs(cmd, args); err != nil {
			return err
		}
	}
	if err := onlyFlags(cmd, args[0], uses...); err != nil {
		return err
	}
	if args[0] == "show" || slices.Contains(uses, "status") {
		if err := jsonOnly(cmd, args[0], "JSON"); err != nil {
			return err
		}
	}
	c, err := newAdminClient(cmd)
	if err != nil {
		return err
	}
	switch args[0] {
	case "summary":
		var v struct {
			Groups []struct {
				Destination, Class string
				Count              int
				OldestDeadAt       time.Time `json:"oldest_dead_at"`
			}
			Total int
		}
		raw, err := c.call(http.MethodGet, "/hookgate/dlq/summary?"+filterQuery(cmd).Encode(), nil, &v)
		if err != nil {
			return err
		}
		if c.format == "json" {
			c.printJSON(raw)
			return nil
		}
		var rows [][]string
		for _, g := range v.Groups {
			rows = append(rows, []string{g.Destination, g.Class, fmt.Sprint(g.Count), ago(g.OldestDeadAt)})
		}
		c.table("DESTINATION\tCLASS\tCOUNT\tOLDEST", rows)
		fmt.Fprintf(c.out, "total: %d\n", v.Total)
	case "list":
		var v struct {
			Entries []httpapi.DeadEntry `json:"entries"`
			Next    string              `json:"next_cursor"`
		}
		if ok, err := c.page(cmd, "/hookgate/dlq", filterQuery(cmd), &v); !ok {
			return err
		}
		var rows [][]string
		for _, e := range v.Entries {
			rows = append(rows, []string{e.ID, e.Destination, e.EventType, e.Class, fmt.Sprint(e.LastStatus), fmt.Sprint(e.Attempts), e.DeadAt.Format(time.RFC3339), problem.Truncate(e.LastError, 60)})
		}
		c.table("ID\tDESTINATION\tTYPE\tCLASS\tSTATUS\tATTEMPTS\tDEAD AT\tLAST ERROR", rows)
		c.more(v.Next)
	case "show":
		q := url.Values{}
		if d, _ := cmd.Flags().GetString("destination"); d != "" {
			q.Set("destination", d)
		}
		raw, err := c.call(http.MethodGet, "/hookgate/dlq/"+pathseg.Escape(args[1])+"?"+q.Encode(), nil, nil)
		if err != nil {
			return err
		}
		c.printJSON(raw) // an envelope reads best as JSON
	case "redrive":
		if named, err := c.redriveStatus(cmd); named {
			return err
		}
		in := redriveBody(cmd)
		return c.batch("/hookgate/dlq/redrive", &in, &in.Limit, in.DryRun, batchWords{
			name: "redrive", noLimit: "release a bounded batch, then watch it",
			matchOne: "dead letter matches", matchMany: "dead letters match", untouched: "nothing moved",
			none:  "no dead letter matches; nothing moved",
			moved: "moved back to the queue", statusHint: "hookgate dlq redrive",
		})
	case "purge":
		return c.purge(purgeBody(cmd))
	}
	return nil
}

// purge removes the dead letters in's filter matches, up to its limit,
// or counts them on a dry run. The admin API refuses what is refused
// here; here it is said in the command's own words.
func (c *adminClient) purge(in httpapi.PurgeRequest) error {
	var filters []string
	for flag, v := range map[string]bool{"--destination": in.Destination != "", "--class": in.Class != "",
		"--since": in.Since != "", "--until": in.Until != "", "--id": len(in.IDs) > 0} {
		if v {
			filters = append(filters, flag)
		}
	}
	slices.Sort(filters)
	switch {
	case len(filters) == 0 && !in.All:
		return fmt.Errorf("purge with no filter removes every dead letter: say --all, or filter with --destination, --class, --since, --until or --id (filter_required)")
	case len(filters) > 0 && in.All:
		return fmt.Errorf("--all is every dead letter, and %s filters: drop one or the other (bad_request)", strings.Join(filters, ", "))
	case in.Limit <= 0 && len(in.IDs) == 0 && !in.DryRun:
		return fmt.Errorf("purge needs --limit N, N at least 1, unless --id names the letters: remove a bounded batch, the oldest first (bad_limit)")
	}
	var v sender.PurgeResult
	raw, err := c.call(http.MethodPost, "/hookgate/dlq/purge", in, &v)
	switch {
	case err != nil:
		return err
	case c.format == "json":
		c.printJSON(raw)
	case in.DryRun:
		fmt.Fprintf(c.out, "dry run: %d %s; nothing removed\n", v.Matched, plural(v.Matched, "dead letter matches", "dead letters match"))
	case v.Matched > v.Removed:
		fmt.Fprintf(c.out, "%d %s removed; %d more match\n", v.Removed, plural(v.Removed, "dead letter", "dead letters"), v.Matched-v.Removed)
	default:
		fmt.Fprintf(c.out, "%d %s removed\n", v.Removed, plural(v.Removed, "dead letter", "dead letters"))
	}
	return nil
}

// purgeBody is a redrive's body and --all.
func purgeBody(cmd *cobra.Command) httpapi.PurgeRequest {
	in := httpapi.PurgeRequest{RedriveRequest: redriveBody(cmd)}
	in.All, _ = cmd.Flags().GetBool("all")
	return in
}

func redriveBody(cmd *cobra.Command) httpapi.RedriveRequest {
	var in httpapi.RedriveRequest
	in.Destination, _ = cmd.Flags().GetString("destination")
	in.Tenant, _ = cmd.Flags().GetString("tenant")
	in.Class, _ = cmd.Flags().GetString("class")
	in.Since, _ = cmd.Flags().GetString("since")
	in.Until, _ = cmd.Flags().GetString("until")
	in.IDs, _ = cmd.Flags().GetStringArray("id")
	in.Limit, _ = cmd.Flags().GetInt("limit")
	in.DryRun, _ = cmd.Flags().GetBool("dry-run")
	in.By = "cli: " + cliUser()
	return in
}

// cliUser names who runs the command, for an audit record.
func cliUser() string {
	who := os.Getenv("USER")
	if u, err := user.Current(); who == "" && err == nil {
		who = u.Username
	}
	if who == "" {
		who = "unknown"
	}
	return who
}
