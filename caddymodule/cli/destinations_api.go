package cli

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hookgate/hookgate/internal/pathseg"
	"github.com/hookgate/hookgate/sender/destinations"
	"github.com/hookgate/hookgate/sender/httpapi"
)

// The flags of create and update: the destination's settings.
var specFlags = []string{"url", "scheme", "secret", "secret-file", "events", "header", "workers", "rate", "description", "metadata", "format"}

// addSpecFlags adds the flags of create, update, delete and rotate.
func addSpecFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.String("url", "", "create, update: where the deliveries go (POST)")
	f.String("scheme", "", "create: the signature scheme (default standard)")
	f.String("secret", "", "create, rotate: the signing secret (default: a new whsec_ one, printed once); --secret-file keeps it out of the process list")
	f.String("secret-file", "", "create, rotate: read the signing secret from this file (- for standard input)")
	f.StringSlice("events", nil, "create, update: the event types it subscribes to, globs (seat.*), comma-separated; none: it takes only enqueues that name it")
	f.StringArray("header", nil, "create, update: a header sent with every request, 'Name: value' (repeatable; update replaces them all)")
	f.Int("workers", 0, "create, update: its deliveries in flight at most")
	f.Float64("rate", 0, "create, update: its attempts per second at most (0: no limit)")
	f.String("description", "", "create, update: what it is, for people")
	f.StringArray("metadata", nil, "create, update: key=value kept with it (repeatable; update replaces them all)")
	f.String("envelopes", "", "delete: purge, or move:<destination>, when it holds envelopes")
	f.String("expire-previous-after", "", "rotate: how long the previous secret signs beside the new one (default 24h; 0s: not at all)")
}

// cmdDestinationsAPI runs create, update, delete and rotate: the
// destinations made through the admin API.
func cmdDestinationsAPI(cmd *cobra.Command, args []string, c *adminClient) error {
	sub := args[0]
	if len(args) != 2 {
		return fmt.Errorf("%s needs the destination's name", sub)
	}
	name, path := args[1], "/hookgate/destinations/"+pathseg.Escape(args[1])
	var (
		raw []byte
		v   destinations.View
		err error
	)
	switch sub {
	case "create":
		if err := onlyFlags(cmd, sub, specFlags...); err != nil {
			return err
		}
		body, err := specBody(cmd, true)
		if err != nil {
			return err
		}
		// A tenant's destination is named <tenant>/<name>.
		if tenant, own, ok := strings.Cut(name, "/"); ok {
			body["tenant"], body["name"] = tenant, own
		} else {
			body["name"] = name
		}
		raw, err = c.call(http.MethodPost, "/hookgate/destinations", body, &v)
		if err != nil {
			return err
		}
	case "update":
		if err := onlyFlags(cmd, sub, "url", "events", "header", "workers", "rate", "description", "metadata", "format"); err != nil {
			return err
		}
		body, err := specBody(cmd, false)
		if err != nil {
			return err
		}
		if len(body) == 0 {
			return errors.New("update: nothing to change: give --url, --events, --header, --workers, --rate, --description or --metadata")
		}
		raw, err = c.call(http.MethodPatch, path, body, &v)
		if err != nil {
			return err
		}
	case "rotate":
		if err := onlyFlags(cmd, sub, "secret", "secret-file", "expire-previous-after", "format"); err != nil {
			return err
		}
		body := map[string]any{}
		secret, err := secretFlag(cmd)
		if err != nil {
			return err
		}
		if secret != "" {
			body["secret"] = secret
		}
		if e, _ := cmd.Flags().GetString("expire-previous-after"); e != "" {
			body["expire_previous_after"] = e
		}
		raw, err = c.call(http.MethodPost, path+"/rotate", body, &v)
		if err != nil {
			return err
		}
	case "delete":
		if err := onlyFlags(cmd, sub, "envelopes", "format"); err != nil {
			return err
		}
		if e, _ := cmd.Flags().GetString("envelopes"); e != "" {
			path += "?envelopes=" + url.QueryEscape(e)
		}
		var d httpapi.Deleted
		raw, err = c.call(http.MethodDelete, path, nil, &d)
		if err != nil {
			return err
		}
		if c.format == "json" {
			c.printJSON(raw)
			return nil
		}
		fmt.Fprintf(c.out, "deleted %s", name)
		switch {
		case d.Purged > 0:
			fmt.Fprintf(c.out, ": %s purged", envelopes(d.Purged))
		case d.Moved > 0:
			fmt.Fprintf(c.out, ": %s moved", envelopes(d.Moved))
		}
		if d.Kept > 0 {
			fmt.Fprintf(c.out, "; %s kept, an orphan's: the other holds their IDs with another payload", envelopes(d.Kept))
		}
		fmt.Fprintln(c.out)
		return nil
	}
	if c.format == "json" {
		c.printJSON(raw)
		return nil
	}
	fmt.Fprintf(c.out, "%sd %s: %s\n", sub, v.Name, v.URL)
	if v.Secret != "" {
		fmt.Fprintf(c.out, "secret: %s\n(shown this once: give it to the subscriber; the gateway never shows it again)\n", v.Secret)
	}
	if v.PreviousExpiresAt != nil {
		fmt.Fprintf(c.out, "the previous secret signs beside it until %s\n", v.PreviousExpiresAt.Format("2006-01-02T15:04:05Z07:00"))
	}
	return nil
}

// secretFlag is the secret --secret gives, or --secret-file's content
// (- reads standard input), trimmed; "" when neither is given.
func secretFlag(cmd *cobra.Command) (string, error) {
	f := cmd.Flags()
	secret, _ := f.GetString("secret")
	path, _ := f.GetString("secret-file")
	switch {
	case path == "":
		return secret, nil
	case secret != "":
		return "", errors.New("--secret and --secret-file: give one")
	}
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(io.LimitReader(cmd.InOrStdin(), 64<<10))
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return "", fmt.Errorf("--secret-file: %w", err)
	}
	if secret = strings.TrimSpace(string(b)); secret == "" {
		return "", errors.New("--secret-file: it holds no secret")
	}
	return secret, nil
}

// envelopes is "1 envelope" or "n envelopes".
func envelopes(n int) string {
	if n == 1 {
		return "1 envelope"
	}
	return fmt.Sprintf("%d envelopes", n)
}

// specBody is the JSON body of the flags given: a create's (url needed)
// or an update's (only what was given).
func specBody(cmd *cobra.Command, create bool) (map[string]any, error) {
	f := cmd.Flags()
	body := map[string]any{}
	for _, name := range []string{"url", "scheme", "description"} {
		if f.Changed(name) {
			body[name], _ = f.GetString(name)
		}
	}
	secret, err := secretFlag(cmd)
	if err != nil {
		return nil, err
	}
	if secret != "" {
		body["secret"] = secret
	}
	if create && body["url"] == nil {
		return nil, errors.New("create needs --url")
	}
	if f.Changed("events") {
		body["events"], _ = f.GetStringSlice("events")
	}
	if f.Changed("workers") {
		body["workers"], _ = f.GetInt("workers")
	}
	if f.Changed("rate") {
		body["rate"], _ = f.GetFloat64("rate")
	}
	if f.Changed("header") {
		h := map[string]string{}
		vals, _ := f.GetStringArray("header")
		for _, kv := range vals {
			k, v, ok := strings.Cut(kv, ":")
			if !ok || strings.TrimSpace(k) == "" {
				return nil, errors.New("--header: want 'Name: value'")
			}
			h[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
		body["headers"] = h
	}
	if f.Changed("metadata") {
		m := map[string]string{}
		vals, _ := f.GetStringArray("metadata")
		for _, kv := range vals {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return nil, fmt.Errorf("--metadata %q: want key=value", kv)
			}
			m[k] = v
		}
		body["metadata"] = m
	}
	return body, nil
}
