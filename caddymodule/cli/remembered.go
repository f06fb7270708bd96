package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/hookgate/hookgate/internal/pathseg"
)

func init() {
	register(caddycmd.Command{
		Name:  "dedupe",
		Usage: "show|forget <key>",
		Short: "Shows or forgets what the gateway remembers of a delivery",
		Long: `
Speaks to a running gateway's admin API (--address, default
$CADDY_ADMIN, else localhost:2019). show prints a key's dedupe entry: absent, claimed (with its
lease) or recorded (the status, the body fingerprint, when it expires); as
a table, or with --format json as the admin API's JSON.
forget deletes it, so that the next copy of the delivery is forwarded as new
(this instance at once, other instances sharing the store within a minute,
their replay cache's bound); the gateway logs who forgot what. Exit code 0,
or 1 on error (forget of an absent key is an error).
Documentation: docs/admin-api.md, "What the gateway remembers".`,
		CobraFunc: func(cmd *cobra.Command) {
			addAdminFlags(cmd)
			cmd.Args = cobra.ExactArgs(2)
			cmd.RunE = runE(adminCommand(func(cmd *cobra.Command, args []string) error {
				return cmdRemembered(cmd, "dedupe", args[0], args[1])
			}))
		},
	})
	register(caddycmd.Command{
		Name:  "freshness",
		Usage: "show <entity>",
		Short: "Shows an entity's freshness watermarks",
		Long: `
Speaks to a running gateway's admin API (--address, default
$CADDY_ADMIN, else localhost:2019). show prints the entity's watermarks, by event time and by
sequence (the newest event applied, and when it is forgotten), and the lease
of an event being applied; as a table, or with --format json as the admin
API's JSON. Exit code 0, or 1 on error.
Documentation: docs/admin-api.md, "What the gateway remembers".`,
		CobraFunc: func(cmd *cobra.Command) {
			addAdminFlags(cmd)
			cmd.Args = cobra.ExactArgs(2)
			cmd.RunE = runE(adminCommand(func(cmd *cobra.Command, args []string) error {
				return cmdRemembered(cmd, "freshness", args[0], args[1])
			}))
		},
	})
}

// cmdRemembered runs dedupe show|forget and freshness show.
func cmdRemembered(cmd *cobra.Command, kind, action, key string) error {
	c, err := newAdminClient(cmd)
	if err != nil {
		return err
	}
	path := "/hookgate/" + kind + "/" + pathseg.Escape(key) // "." and ".." too
	switch {
	case action == "show":
		var v remembered
		raw, err := c.call(http.MethodGet, path, nil, &v)
		if err != nil {
			return err
		}
		switch {
		case c.format == "json":
			c.printJSON(raw)
		case kind == "dedupe":
			body := "-"
			if v.State == "recorded" {
				body = fmt.Sprintf("%d bytes", v.BodyBytes)
				if v.BodyOmitted {
					body = "omitted"
				}
			}
			c.table("KEY\tSTATE\tSTATUS\tBODY\tFINGERPRINT\tEXPIRES\tLEASE UNTIL",
				[][]string{{v.Key, v.State, orDash(v.Status), body, orDash(v.Fingerprint), stamp(v.ExpiresAt), stamp(v.LeaseUntil)}})
		default:
			var rows [][]string
			for _, by := range []struct {
				name string
				w    watermark
			}{{"event_time", v.EventTime}, {"sequence", v.Sequence}} {
				rows = append(rows, []string{by.name, orDash(by.w.Watermark), stamp(by.w.ExpiresAt), stamp(by.w.LeaseUntil)})
			}
			fmt.Fprintf(c.out, "entity %s\n", v.Entity)
			c.table("BY\tWATERMARK\tEXPIRES\tLEASE UNTIL", rows)
		}
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

// remembered is the admin API's answer for a dedupe key or an entity.
type remembered struct {
	Key         string          `json:"key"`
	State       string          `json:"state"`
	Status      json.RawMessage `json:"status"`
	BodyBytes   int             `json:"body_bytes"`
	BodyOmitted bool            `json:"body_omitted"`
	Fingerprint string          `json:"fingerprint"`
	ExpiresAt   *time.Time      `json:"expires_at"`
	LeaseUntil  *time.Time      `json:"lease_until"`

	Entity    string    `json:"entity"`
	EventTime watermark `json:"event_time"`
	Sequence  watermark `json:"sequence"`
}

// watermark is an entity's watermark and lease, by event time or by
// sequence: the watermark is a time or a number.
type watermark struct {
	Watermark  json.RawMessage `json:"watermark"`
	ExpiresAt  *time.Time      `json:"expires_at"`
	LeaseUntil *time.Time      `json:"lease_until"`
}

// orDash is a JSON value as text, its quotes removed: "-" for none.
func orDash[T ~string | ~[]byte](v T) string {
	s := strings.Trim(string(v), `"`)
	if s == "" || s == "null" {
		return "-"
	}
	return s
}

// stamp is t in UTC, to the second: "-" for none.
func stamp(t *time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}
