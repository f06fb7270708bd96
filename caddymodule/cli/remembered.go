package cli

import (
	"fmt"
	"net/http"
	"net/url"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"
)

func init() {
	register(caddycmd.Command{
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
Speaks to a running gateway's admin API (--address, default Caddy's
localhost:2019). show prints the entity's watermarks, by event time and by
sequence (the newest event applied, and when it is forgotten), and the lease
of an event being applied. Exit code 0, or 1 on error.
Documentation: README.md, "What the gateway remembers".`,
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
