package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/spf13/cobra"

	"github.com/hookgate/hookgate/internal/problem"
)

// The dlq, destinations, dedupe and freshness commands speak to a running
// gateway's admin API: the same service as the admin endpoints.

func addAdminFlags(cmd *cobra.Command) {
	cmd.Flags().String("address", "", "the admin API's host:port (default: Caddy's, localhost:2019)")
	cmd.Flags().String("format", "table", "table or json (the admin API's answer)")
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
	defer func() { _ = resp.Body.Close() }() // read below
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("reading the answer: %w", err)
	}
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

func ago(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return time.Since(t).Truncate(time.Second).String()
}
