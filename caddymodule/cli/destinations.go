package cli

import (
	"cmp"
	"fmt"
	"net/http"
	"net/url"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/hookgate/hookgate/internal/pathseg"
	"github.com/hookgate/hookgate/sender"
)

func init() {
	register(caddycmd.Command{
		Name:  "destinations",
		Usage: "list|pause <name>|resume <name>|move <orphan> <to>|purge <orphan>|create <name> --url <url>|update <name>|rotate <name>|delete <name>",
		Short: "Lists, pauses and resumes the sender's destinations; moves or purges orphans; creates, updates, rotates and deletes destinations at run time",
		Long: `
Speaks to a running gateway's admin API (--address, default
$CADDY_ADMIN, else localhost:2019). list shows each destination's state, breaker and queue
depth; pause stops its deliveries (its events are kept); resume starts them
again, also after a 410 Gone paused it. A destination the store holds
envelopes of but the configuration no longer names (renamed, removed) is
listed as orphaned: nothing of it is delivered until move sends its queued
and dead envelopes to a configured destination (IDs and attempt logs kept),
or purge deletes them.

create, update, rotate and delete manage the destinations made at run time
(kept in the store, applied by every instance within a second, the SSRF
guard always on): create prints the signing secret once (a new whsec_ one
unless --secret gives it); update changes only the flags given (--header
and --metadata replace all of theirs); rotate makes a new secret, the
previous one signing beside it for --expire-previous-after (default 24h);
delete of a destination that holds envelopes needs --envelopes purge or
--envelopes move:<destination>. A Caddyfile destination is changed in the
Caddyfile. Exit code 0, or 1 on error.
Documentation: docs/sending.md, "The sender", at github.com/hookgate/hookgate.`,
		CobraFunc: func(cmd *cobra.Command) {
			addAdminFlags(cmd)
			addSpecFlags(cmd)
			cmd.Flags().String("tenant", "", "list: only this tenant's destinations")
			cmd.Args = cobra.RangeArgs(1, 3)
			cmd.RunE = runE(adminCommand(cmdDestinations))
		},
	})
}

func cmdDestinations(cmd *cobra.Command, args []string) error {
	if args[0] == "list" {
		if err := noArgs(cmd, args); err != nil {
			return err
		}
	}
	c, err := newAdminClient(cmd)
	if err != nil {
		return err
	}
	switch args[0] {
	case "create", "update", "rotate", "delete":
		return cmdDestinationsAPI(cmd, args, c)
	case "list":
		if err := onlyFlags(cmd, args[0], "tenant", "format"); err != nil {
			return err
		}
	case "pause", "resume", "move", "purge":
		if err := onlyFlags(cmd, args[0], "format"); err != nil {
			return err
		}
	}
	switch args[0] {
	case "list":
		var v struct{ Destinations []sender.DestinationStatus }
		path := "/hookgate/destinations"
		if t, _ := cmd.Flags().GetString("tenant"); cmd.Flags().Changed("tenant") {
			path += "?tenant=" + url.QueryEscape(t)
		}
		raw, err := c.call(http.MethodGet, path, nil, &v)
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
			ordering := "-"
			if d.Ordering == "entity" {
				ordering = "entity/" + d.OnDead
			}
			rows = append(rows, []string{d.Name, cmp.Or(d.Source, "-"), d.State, breaker, ordering, fmt.Sprint(d.Depth["queued"]), fmt.Sprint(d.Depth["leased"]),
				fmt.Sprint(d.Depth["paused"]), fmt.Sprint(d.Depth["dead"]), fmt.Sprint(d.Depth["waiting"]), fmt.Sprint(d.Depth["held"]),
				oldestReady(d.OldestReadyAge)})
		}
		c.table("NAME\tSOURCE\tSTATE\tBREAKER\tORDERING\tQUEUED\tLEASED\tPAUSED\tDEAD\tWAITING\tHELD\tOLDEST READY", rows)
	case "pause", "resume":
		if len(args) != 2 {
			return fmt.Errorf("%s needs a destination name", args[0])
		}
		var d sender.DestinationStatus
		raw, err := c.call(http.MethodPost, "/hookgate/destinations/"+pathseg.Escape(args[1])+"/"+args[0], nil, &d)
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
		raw, err := c.call(http.MethodPost, "/hookgate/destinations/"+pathseg.Escape(args[1])+"/move", map[string]string{"to": args[2]}, &v)
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
		raw, err := c.call(http.MethodPost, "/hookgate/destinations/"+pathseg.Escape(args[1])+"/purge", nil, &v)
		if err != nil {
			return err
		}
		if c.format == "json" {
			c.printJSON(raw)
			return nil
		}
		fmt.Fprintf(c.out, "purged %s: %d envelopes removed\n", args[1], v.Removed)
	default:
		return fmt.Errorf("unknown destinations command %q: want list, pause, resume, move, purge, create, update, rotate or delete", args[0])
	}
	return nil
}

// oldestReady is the age of a destination's oldest envelope due, in
// seconds: "-" when none is due (the queue is empty, or all wait for a
// retry), as the console shows "–".
func oldestReady(age float64) string {
	if age <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0fs", age)
}
