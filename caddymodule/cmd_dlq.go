package caddymodule

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/user"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/hookgate/hookgate/internal/problem"
	"github.com/hookgate/hookgate/sender"
	"github.com/hookgate/hookgate/sender/httpapi"
)

// The dlq and destinations commands speak to a running gateway's admin
// API: the same dead-letter service as the admin endpoints.

func init() {
	registerCommand(caddycmd.Command{
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
			cmd.RunE = func(cmd *cobra.Command, args []string) error {
				return exitOnError(cmdDLQ(cmd, args))
			}
		},
	})
	registerCommand(caddycmd.Command{
		Name:  "destinations",
		Usage: "list|pause <name>|resume <name>|move <orphan> <to>|purge <orphan>",
		Short: "Lists, pauses and resumes the sender's destinations; moves or purges orphans",
		Long: `
Speaks to a running gateway's admin API (--address, default Caddy's
localhost:2019). list shows each destination's state, breaker and queue
depth; pause stops its deliveries (its events are kept); resume starts them
again, also after a 410 Gone paused it. A destination the store holds
envelopes of but the configuration no longer names (renamed, removed) is
listed as orphaned: nothing of it is delivered until move sends its queued
and dead envelopes to a configured destination (IDs and attempt logs kept),
or purge deletes them. Exit code 0, or 1 on error.
Documentation: README.md, "The sender", at github.com/hookgate/hookgate.`,
		CobraFunc: func(cmd *cobra.Command) {
			addAdminFlags(cmd)
			cmd.Args = cobra.RangeArgs(1, 3)
			cmd.RunE = func(cmd *cobra.Command, args []string) error {
				return exitOnError(cmdDestinations(cmd, args))
			}
		},
	})
}

func addAdminFlags(cmd *cobra.Command) {
	cmd.Flags().String("address", "", "the admin API's host:port (default: Caddy's, localhost:2019)")
	cmd.Flags().String("format", "table", "table or json (show and --status always print JSON)")
}

// exitOnError prints err and exits 1: usage is not printed for a failed
// request.
func exitOnError(err error) error {
	if err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
	return nil
}

// adminClient calls the admin API.
type adminClient struct {
	base   string
	format string
	out    io.Writer
}

func newAdminClient(cmd *cobra.Command) (*adminClient, error) {
	addr, _ := cmd.Flags().GetString("address")
	if addr == "" {
		addr = caddy.DefaultAdminListen
	}
	format, _ := cmd.Flags().GetString("format")
	if format != "table" && format != "json" {
		return nil, fmt.Errorf("--format %q: want table or json", format)
	}
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	return &adminClient{base: strings.TrimSuffix(addr, "/"), format: format, out: cmd.OutOrStdout()}, nil
}

// call sends a request and decodes the JSON answer into v; a problem
// answer is an error with its detail.
func (c *adminClient) call(method, path string, body, v any) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	client := &http.Client{Timeout: 60 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("is the gateway running with its admin API on %s? %w", c.base, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if resp.StatusCode >= 300 {
		var p problem.Details
		if json.Unmarshal(b, &p) == nil && p.Detail != "" {
			return nil, fmt.Errorf("%s (%d %s)", p.Detail, resp.StatusCode, p.Reason)
		}
		return nil, fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			return nil, fmt.Errorf("decoding the answer: %w", err)
		}
	}
	return b, nil
}

// printJSON prints the raw answer, indented.
func (c *adminClient) printJSON(raw []byte) {
	var buf bytes.Buffer
	if json.Indent(&buf, raw, "", "  ") != nil {
		buf.Write(raw)
	}
	fmt.Fprintln(c.out, strings.TrimSpace(buf.String()))
}

func (c *adminClient) table(header string, rows [][]string) {
	tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	tw.Flush()
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

func ago(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return time.Since(t).Truncate(time.Second).String()
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
		q := filterQuery(cmd)
		if n, _ := cmd.Flags().GetInt("limit"); n > 0 {
			q.Set("limit", fmt.Sprint(n))
		}
		if cur, _ := cmd.Flags().GetString("cursor"); cur != "" {
			q.Set("cursor", cur)
		}
		var v struct {
			Entries []httpapi.DeadEntry `json:"entries"`
			Next    string              `json:"next_cursor"`
		}
		raw, err := c.call(http.MethodGet, "/hookgate/dlq?"+q.Encode(), nil, &v)
		if err != nil {
			return err
		}
		if c.format == "json" {
			c.printJSON(raw)
			return nil
		}
		var rows [][]string
		for _, e := range v.Entries {
			rows = append(rows, []string{e.ID, e.Destination, e.EventType, e.Class, fmt.Sprint(e.LastStatus), fmt.Sprint(e.Attempts), e.DeadAt.Format(time.RFC3339), truncate(e.LastError, 60)})
		}
		c.table("ID\tDESTINATION\tTYPE\tCLASS\tSTATUS\tATTEMPTS\tDEAD AT\tLAST ERROR", rows)
		if v.Next != "" {
			fmt.Fprintf(c.out, "more: --cursor '%s'\n", v.Next)
		}
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
		if id, _ := cmd.Flags().GetString("status"); id != "" {
			raw, err := c.call(http.MethodGet, "/hookgate/redrives/"+url.PathEscape(id), nil, nil)
			if err != nil {
				return err
			}
			c.printJSON(raw)
			return nil
		}
		in, err := redriveBody(cmd)
		if err != nil {
			return err
		}
		if in.Limit <= 0 && !in.DryRun {
			return fmt.Errorf("redrive needs --limit N, N at least 1: release a bounded batch, then watch it (bad_limit)")
		}
		if in.Limit <= 0 {
			in.Limit = 1
		}
		var v struct {
			ID      string `json:"redrive_id"`
			Matched int    `json:"matched"`
			Moved   int    `json:"moved"`
		}
		raw, err := c.call(http.MethodPost, "/hookgate/dlq/redrive", in, &v)
		if err != nil {
			return err
		}
		if c.format == "json" {
			c.printJSON(raw)
			return nil
		}
		if in.DryRun {
			fmt.Fprintf(c.out, "dry run: %d dead letters match; nothing moved\n", v.Matched)
			return nil
		}
		if v.ID == "" {
			fmt.Fprintf(c.out, "no dead letter matches; nothing moved\n")
			return nil
		}
		fmt.Fprintf(c.out, "redrive %s: %d matched, %d moved back to the queue\nwatch: hookgate dlq redrive --status %s\n", v.ID, v.Matched, v.Moved, v.ID)
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
		fmt.Fprintf(c.out, "%d dead letters removed\n", v.Removed)
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
	who := os.Getenv("USER")
	if u, err := user.Current(); who == "" && err == nil {
		who = u.Username
	}
	if who == "" {
		who = "unknown"
	}
	in.By = "cli: " + who
	return in, nil
}

func cmdDestinations(cmd *cobra.Command, args []string) error {
	c, err := newAdminClient(cmd)
	if err != nil {
		return err
	}
	switch args[0] {
	case "list":
		var v struct{ Destinations []sender.DestinationStatus }
		raw, err := c.call(http.MethodGet, "/hookgate/destinations", nil, &v)
		if err != nil {
			return err
		}
		if c.format == "json" {
			c.printJSON(raw)
			return nil
		}
		var rows [][]string
		for _, d := range v.Destinations {
			breaker := d.Breaker
			if breaker == "" {
				breaker = "-"
			}
			rows = append(rows, []string{d.Name, d.State, breaker, fmt.Sprint(d.Depth["queued"]), fmt.Sprint(d.Depth["leased"]),
				fmt.Sprint(d.Depth["paused"]), fmt.Sprint(d.Depth["dead"]), fmt.Sprintf("%.0fs", d.OldestReadyAge)})
		}
		c.table("NAME\tSTATE\tBREAKER\tQUEUED\tLEASED\tPAUSED\tDEAD\tOLDEST READY", rows)
	case "pause", "resume":
		if len(args) != 2 {
			return fmt.Errorf("%s needs a destination name", args[0])
		}
		var d sender.DestinationStatus
		raw, err := c.call(http.MethodPost, "/hookgate/destinations/"+url.PathEscape(args[1])+"/"+args[0], nil, &d)
		if err != nil {
			return err
		}
		if c.format == "json" {
			c.printJSON(raw)
			return nil
		}
		fmt.Fprintf(c.out, "%s: %s\n", d.Name, d.State)
	case "move":
		if len(args) != 3 {
			return fmt.Errorf("move needs the orphan and the configured destination to move to")
		}
		var v struct{ Moved, Kept int }
		raw, err := c.call(http.MethodPost, "/hookgate/destinations/"+url.PathEscape(args[1])+"/move", map[string]string{"to": args[2]}, &v)
		if err != nil {
			return err
		}
		if c.format == "json" {
			c.printJSON(raw)
			return nil
		}
		fmt.Fprintf(c.out, "moved %d from %s to %s", v.Moved, args[1], args[2])
		if v.Kept > 0 {
			fmt.Fprintf(c.out, "; %d kept in %s: %s holds their IDs with another payload", v.Kept, args[1], args[2])
		}
		fmt.Fprintln(c.out)
	case "purge":
		if len(args) != 2 {
			return fmt.Errorf("purge needs the orphan's name")
		}
		var v struct{ Removed int }
		raw, err := c.call(http.MethodPost, "/hookgate/destinations/"+url.PathEscape(args[1])+"/purge", nil, &v)
		if err != nil {
			return err
		}
		if c.format == "json" {
			c.printJSON(raw)
			return nil
		}
		fmt.Fprintf(c.out, "purged %s: %d envelopes removed\n", args[1], v.Removed)
	default:
		return fmt.Errorf("unknown destinations command %q: want list, pause, resume, move or purge", args[0])
	}
	return nil
}

func init() {
	registerCommand(caddycmd.Command{
		Name:  "dedupe",
		Usage: "show|forget <key>",
		Short: "Shows or forgets what the gateway remembers of a delivery",
		Long: `
Speaks to a running gateway's admin API (--address, default Caddy's
localhost:2019). show prints a key's dedupe entry: absent, claimed (with its
lease) or recorded (the status, the body fingerprint, when it expires).
forget deletes it, so that the next copy of the delivery is forwarded as new
(this instance at once, other instances sharing the store within a minute,
their replay cache's bound); the gateway logs who forgot what. Exit code 0,
or 1 on error (forget of an absent key is an error).
Documentation: README.md, "What the gateway remembers".`,
		CobraFunc: func(cmd *cobra.Command) {
			addAdminFlags(cmd)
			cmd.Args = cobra.ExactArgs(2)
			cmd.RunE = func(cmd *cobra.Command, args []string) error {
				return exitOnError(cmdRemembered(cmd, "dedupe", args[0], args[1]))
			}
		},
	})
	registerCommand(caddycmd.Command{
		Name:  "freshness",
		Usage: "show <entity>",
		Short: "Shows an entity's freshness watermarks",
		Long: `
Speaks to a running gateway's admin API (--address, default Caddy's
localhost:2019). show prints the entity's watermarks, by event time and by
sequence (the newest event applied, and when it is forgotten), and the lease
of an event being applied. Exit code 0, or 1 on error.
Documentation: README.md, "What the gateway remembers".`,
		CobraFunc: func(cmd *cobra.Command) {
			addAdminFlags(cmd)
			cmd.Args = cobra.ExactArgs(2)
			cmd.RunE = func(cmd *cobra.Command, args []string) error {
				return exitOnError(cmdRemembered(cmd, "freshness", args[0], args[1]))
			}
		},
	})
}

// cmdRemembered runs dedupe show|forget and freshness show.
func cmdRemembered(cmd *cobra.Command, kind, action, key string) error {
	c, err := newAdminClient(cmd)
	if err != nil {
		return err
	}
	path := "/hookgate/" + kind + "/" + url.PathEscape(key)
	switch {
	case action == "show":
		raw, err := c.call(http.MethodGet, path, nil, nil)
		if err != nil {
			return err
		}
		c.printJSON(raw)
	case action == "forget" && kind == "dedupe":
		if _, err := c.call(http.MethodDelete, path, nil, nil); err != nil {
			return err
		}
		fmt.Fprintf(c.out, "%s forgotten: its next copy is forwarded as new\n", key)
	default:
		return fmt.Errorf("unknown %s command %q", kind, action)
	}
	return nil
}
