package cli

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/user"
	"time"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/hookgate/hookgate/internal/problem"
	"github.com/hookgate/hookgate/sender/httpapi"
)

func init() {
	register(caddycmd.Command{
		Name:  "dlq",
		Usage: "summary|list|show <id>|redrive|purge [--destination <name>] [--class <class>] [--since <time>] [--until <time>] [--id <id>]... [--limit <n>] [--dry-run]",
		Short: "Inspects, redrives and purges the sender's dead letters",
		Long: `
Speaks to a running gateway's admin API (--address, default Caddy's
localhost:2019). summary groups dead letters by destination and error
class; list pages through them; show prints one with its attempt log;
redrive moves a bounded batch back to the queue under a new redrive ID
(--limit is required; --dry-run only counts) and prints the ID, then
"hookgate dlq redrive --status <id>" shows its progress; purge deletes.
Filters: --destination, --class (network, timeout, http_5xx, http_4xx,
http_3xx, gone, request), --since and --until (RFC 3339), --id (repeatable).
--format json prints the admin API's JSON (show and --status always do).
Exit code 0, or 1 on error.
Documentation: README.md, "Dead letters", at github.com/hookgate/hookgate.`,
		CobraFunc: func(cmd *cobra.Command) {
			addAdminFlags(cmd)
			cmd.Flags().String("destination", "", "only this destination")
			cmd.Flags().String("class", "", "only this error class")
			cmd.Flags().String("since", "", "dead at or after (RFC 3339)")
			cmd.Flags().String("until", "", "dead before (RFC 3339)")
			cmd.Flags().StringArray("id", nil, "only this delivery ID (repeatable)")
			cmd.Flags().Int("limit", 0, "list: page size; redrive: the most moved (required)")
			cmd.Flags().String("cursor", "", "list: the next_cursor of the previous page")
			cmd.Flags().Bool("dry-run", false, "redrive: count what matches, move nothing")
			cmd.Flags().String("status", "", "redrive: show the progress of this redrive ID")
			cmd.Args = cobra.RangeArgs(1, 2)
			cmd.RunE = runE(adminCommand(cmdDLQ))
		},
	})
}

// filterQuery turns the filter flags into query parameters.
func filterQuery(cmd *cobra.Command) url.Values {
	q := url.Values{}
	for _, name := range []string{"destination", "class", "since", "until"} {
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

func cmdDLQ(cmd *cobra.Command, args []string) error {
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
		if len(args) != 2 {
			return fmt.Errorf("show needs a delivery ID")
		}
		q := url.Values{}
		if d, _ := cmd.Flags().GetString("destination"); d != "" {
			q.Set("destination", d)
		}
		raw, err := c.call(http.MethodGet, "/hookgate/dlq/"+url.PathEscape(args[1])+"?"+q.Encode(), nil, nil)
		if err != nil {
			return err
		}
		c.printJSON(raw) // an envelope reads best as JSON
	case "redrive":
		if named, err := c.redriveStatus(cmd); named {
			return err
		}
		in, err := redriveBody(cmd)
		if err != nil {
			return err
		}
		return c.batch("/hookgate/dlq/redrive", &in, &in.Limit, in.DryRun, batchWords{
			name: "redrive", noLimit: "release a bounded batch, then watch it",
			matchOne: "dead letter matches", matchMany: "dead letters match", untouched: "nothing moved",
			none:  "no dead letter matches; nothing moved",
			moved: "moved back to the queue", statusHint: "hookgate dlq redrive",
		})
	case "purge":
		in, err := redriveBody(cmd)
		if err != nil {
			return err
		}
		var v struct{ Removed int }
		raw, err := c.call(http.MethodPost, "/hookgate/dlq/purge", in, &v)
		if err != nil {
			return err
		}
		if c.format == "json" {
			c.printJSON(raw)
			return nil
		}
		fmt.Fprintf(c.out, "%d %s removed\n", v.Removed, plural(v.Removed, "dead letter", "dead letters"))
	default:
		return fmt.Errorf("unknown dlq command %q: want summary, list, show, redrive or purge", args[0])
	}
	return nil
}

func redriveBody(cmd *cobra.Command) (httpapi.RedriveRequest, error) {
	var in httpapi.RedriveRequest
	in.Destination, _ = cmd.Flags().GetString("destination")
	in.Class, _ = cmd.Flags().GetString("class")
	in.Since, _ = cmd.Flags().GetString("since")
	in.Until, _ = cmd.Flags().GetString("until")
	in.IDs, _ = cmd.Flags().GetStringArray("id")
	in.Limit, _ = cmd.Flags().GetInt("limit")
	in.DryRun, _ = cmd.Flags().GetBool("dry-run")
	in.By = "cli: " + cliUser()
	return in, nil
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
