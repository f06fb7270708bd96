package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/hookgate/hookgate/internal/adminclient"
)

// The dlq, destinations, dedupe and freshness commands speak to a running
// gateway's admin API: the same service as the admin endpoints.

func addAdminFlags(cmd *cobra.Command) {
	cmd.Flags().String("address", "", adminAddressUsage)
	cmd.Flags().String("format", "table", "table or json (the admin API's answer)")
}

// adminAddressUsage is every admin command's --address help.
const adminAddressUsage = "the admin API: host:port or unix//path/to/admin.sock (default: $CADDY_ADMIN, which the shipped image and unit set, else localhost:2019)"

// adminEndpoint is the admin API that --address names, else Caddy's
// default (adminclient.DefaultAddress: CADDY_ADMIN, else localhost:2019);
// timeout bounds each request (0: none).
func adminEndpoint(cmd *cobra.Command, timeout time.Duration) (*adminclient.Endpoint, error) {
	addr, _ := cmd.Flags().GetString("address")
	return adminclient.New(addr, timeout)
}

// adminCommand is an admin API command's function: exit code 0, or 1 on
// error. Usage is not printed for a failed request.
func adminCommand(f func(cmd *cobra.Command, args []string) error) commandFunc {
	return func(cmd *cobra.Command, args []string) (int, error) {
		if err := f(cmd, args); err != nil {
			return 1, err
		}
		return 0, nil
	}
}

// adminClient calls the admin API.
type adminClient struct {
	admin  *adminclient.Endpoint
	format string
	out    io.Writer
}

func newAdminClient(cmd *cobra.Command) (*adminClient, error) {
	format, _ := cmd.Flags().GetString("format")
	if format != "table" && format != "json" {
		return nil, fmt.Errorf("--format %q: want table or json", format)
	}
	admin, err := adminEndpoint(cmd, 60*time.Second)
	if err != nil {
		return nil, err
	}
	return &adminClient{admin: admin, format: format, out: cmd.OutOrStdout()}, nil
}

// call sends a request (body as JSON, if not nil) and decodes the JSON
// answer into v (if not nil); a refusal is an *adminclient.Error, which
// reads "<detail> (<status> <reason>)".
func (c *adminClient) call(method, path string, body, v any) ([]byte, error) {
	b, err := c.admin.Call(context.Background(), method, path, body)
	if err != nil {
		return nil, err
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

func ago(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return time.Since(t).Truncate(time.Second).String()
}

// page GETs one page of path with the query q, --limit and --cursor,
// decoded into v. Under --format json it prints the answer as it came and
// says false; else the caller prints v as a table, then more.
func (c *adminClient) page(cmd *cobra.Command, path string, q url.Values, v any) (bool, error) {
	if n, _ := cmd.Flags().GetInt("limit"); n > 0 {
		q.Set("limit", fmt.Sprint(n))
	}
	if cur, _ := cmd.Flags().GetString("cursor"); cur != "" {
		q.Set("cursor", cur)
	}
	raw, err := c.call(http.MethodGet, path+"?"+q.Encode(), nil, v)
	if err != nil {
		return false, err
	}
	if c.format == "json" {
		c.printJSON(raw)
		return false, nil
	}
	return true, nil
}

// more says how to ask for the page after this one, if there is one.
func (c *adminClient) more(next string) {
	if next != "" {
		fmt.Fprintf(c.out, "more: --cursor '%s'\n", next)
	}
}

// redriveStatus prints the redrive (or resend) that --status names, and
// says whether it named one.
func (c *adminClient) redriveStatus(cmd *cobra.Command) (bool, error) {
	id, _ := cmd.Flags().GetString("status")
	if id == "" {
		return false, nil
	}
	raw, err := c.call(http.MethodGet, "/hookgate/redrives/"+url.PathEscape(id), nil, nil)
	if err != nil {
		return true, err
	}
	c.printJSON(raw)
	return true, nil
}

// batchWords are how a bounded batch (a redrive, a resend) speaks of
// itself.
type batchWords struct {
	name       string // "redrive"
	noLimit    string // why it needs --limit
	matchOne   string // "dead letter matches"
	matchMany  string // "dead letters match"
	untouched  string // "nothing moved"
	none       string // the answer when nothing matches
	moved      string // what happened to the moved ones
	statusHint string // the command that watches it
}

// batch POSTs a bounded batch to path (in carries its filter, limit and
// dry run), and prints what it matched and moved.
func (c *adminClient) batch(path string, in any, limit *int, dryRun bool, w batchWords) error {
	if *limit <= 0 && !dryRun {
		return fmt.Errorf("%s needs --limit N, N at least 1: %s (bad_limit)", w.name, w.noLimit)
	}
	if *limit <= 0 {
		*limit = 1
	}
	var v struct {
		ID      string `json:"redrive_id"`
		Matched int    `json:"matched"`
		More    bool   `json:"more"` // matched is a lower bound
		Moved   int    `json:"moved"`
	}
	raw, err := c.call(http.MethodPost, path, in, &v)
	if err != nil {
		return err
	}
	switch {
	case c.format == "json":
		c.printJSON(raw)
	case dryRun && v.More:
		fmt.Fprintf(c.out, "dry run: at least %d %s; %s\n", v.Matched, w.matchMany, w.untouched)
	case dryRun:
		fmt.Fprintf(c.out, "dry run: %d %s; %s\n", v.Matched, plural(v.Matched, w.matchOne, w.matchMany), w.untouched)
	case v.ID == "":
		fmt.Fprintln(c.out, w.none)
	default:
		atLeast := ""
		if v.More {
			atLeast = "at least "
		}
		fmt.Fprintf(c.out, "%s %s: %s%d matched, %d %s\nwatch: %s --status %s\n", w.name, v.ID, atLeast, v.Matched, v.Moved, w.moved, w.statusHint, v.ID)
	}
	return nil
}
