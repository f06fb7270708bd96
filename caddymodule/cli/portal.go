package cli

import (
	"errors"
	"fmt"
	"net/http"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/hookgate/hookgate/portal"
	"github.com/hookgate/hookgate/sender/httpapi"
)

func init() {
	register(caddycmd.Command{
		Name:  "portal-link",
		Usage: "--tenant <id> [--ttl <duration>] | --tenant <id> --revoke",
		Short: "Issues a link to a tenant's portal, or revokes the tenant's links",
		Long: `
Speaks to a running gateway's admin API (--address, default
$CADDY_ADMIN, else localhost:2019). Prints a URL to the console that
webhook_console { portal } serves at portal_url, scoped to the tenant's
destinations: their dead letters and deliveries, replay and resend. It
carries a token signed under portal_key that expires after --ttl
(default 1h, at most 720h): hand it to the tenant, as it is a
credential. --revoke ends every link of the tenant issued so far, and
their open sessions. --format json prints the admin API's JSON.
Exit code 0, or 1 on error.
Documentation: docs/tenants.md at github.com/hookgate/hookgate.`,
		CobraFunc: func(cmd *cobra.Command) {
			addAdminFlags(cmd)
			cmd.Flags().String("tenant", "", "the tenant (required)")
			cmd.Flags().Duration("ttl", portal.DefaultTTL, "how long the link opens the portal")
			cmd.Flags().Bool("revoke", false, "revoke the tenant's links instead")
			cmd.Args = cobra.NoArgs
			cmd.RunE = runE(adminCommand(cmdPortalLink))
		},
	})
}

func cmdPortalLink(cmd *cobra.Command, _ []string) error {
	tenant, _ := cmd.Flags().GetString("tenant")
	revoke, _ := cmd.Flags().GetBool("revoke")
	switch {
	case tenant == "":
		return errors.New("--tenant is required")
	case revoke && cmd.Flags().Changed("ttl"):
		return errors.New("--revoke takes --tenant alone, not --ttl")
	}
	c, err := newAdminClient(cmd)
	if err != nil {
		return err
	}
	if revoke {
		raw, err := c.call(http.MethodPost, "/hookgate/portal-links/revoke", httpapi.PortalLinkRequest{Tenant: tenant}, nil)
		if err != nil {
			return err
		}
		if c.format == "json" {
			c.printJSON(raw)
			return nil
		}
		fmt.Fprintf(c.out, "revoked the portal links of tenant %s issued so far\n", tenant)
		return nil
	}
	ttl, _ := cmd.Flags().GetDuration("ttl")
	var link portal.Link
	raw, err := c.call(http.MethodPost, "/hookgate/portal-links", httpapi.PortalLinkRequest{Tenant: tenant, TTL: ttl.String()}, &link)
	if err != nil {
		return err
	}
	if c.format == "json" {
		c.printJSON(raw)
		return nil
	}
	fmt.Fprintln(c.out, link.URL)
	fmt.Fprintf(c.out, "(opens tenant %s's portal until %s: hand it over as a credential)\n", tenant, link.ExpiresAt.Format("2006-01-02T15:04:05Z07:00"))
	return nil
}
