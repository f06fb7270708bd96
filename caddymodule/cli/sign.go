package cli

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/hookgate/hookgate/internal/suggest"
	"github.com/hookgate/hookgate/verify"
)

func init() {
	register(caddycmd.Command{
		Name:  "sign",
		Usage: "[--scheme <scheme>] [--secret <secret>] [--id <id>] [--timestamp <unix>] [--url <url>] [--key-id <keyid>] [--send <url> [-H 'Name: value']... [--content-type <type>]] <body|@file|@->",
		Short: "Signs a webhook body as a genuine sender would, and optionally sends it",
		Long: `
Prints the headers a genuine sender of the given scheme adds to the body,
one "Name: value" per line; for sns and mailgun, whose signatures are
inside the body, then an empty line and the signed body. With --send, POSTs the signed body to the URL
instead and prints the response's status line, headers and body; the exit
code is 0 for a 2xx answer and 1 otherwise.

The body is the argument itself, or @file to read a file, or @- to read
standard input. The secret defaults to $HOOKGATE_SECRET, so that it need not
appear in the shell history. The delivery ID defaults to a random msg_ ID,
the timestamp to now. With --send, -H adds a request header (repeatable, as
curl's), and --content-type sets the body's type (default application/json
for a JSON body; for another, application/x-www-form-urlencoded under twilio
and mailgun, none otherwise). An -H of a header the signature sets (the delivery ID's,
the timestamp's, the signature's) is refused: give the ID with --id and the
timestamp with --timestamp. The schemes that sign the URL (twilio,
rfc9421, hubspot, square) sign --url, or --send's URL; rfc9421 names its
key with --key-id. The public-key ones (discord, sendgrid, telnyx) sign
with a PKCS#8 PEM private key as --secret; sns too, an RSA key, with
--key-id the SigningCertURL its certificate is served at, and the body an
SNS message (Type, TopicArn, Message; sign fills in the rest); and pubsub,
an RSA key, with --key-id the service account its token names and --url
(or --send's) its audience. mailgun fills in a JSON body's signature
object (or a form's timestamp, token and signature fields), the token
from --id.
See docs/receiving.md, "Sending test requests".`,
		CobraFunc: func(cmd *cobra.Command) {
			cmd.Flags().String("scheme", "standard", "signature scheme: "+strings.Join(namedSchemes(), ", "))
			cmd.Flags().String("secret", "", "signing secret (default $HOOKGATE_SECRET)")
			cmd.Flags().String("id", "", "delivery ID (default a random msg_ ID)")
			cmd.Flags().Int64("timestamp", 0, "unix timestamp to sign (default now)")
			cmd.Flags().String("send", "", "POST the signed request to this URL")
			cmd.Flags().String("url", "", "the URL to sign, for the schemes that sign it (twilio, rfc9421, hubspot, square; pubsub's audience; default --send's)")
			cmd.Flags().String("key-id", "", "rfc9421: the keyid the signature names; sns: the SigningCertURL of the key's certificate; pubsub: the service account")
			cmd.Flags().StringArrayP("header", "H", nil, "with --send: add a request header 'Name: value' (repeatable)")
			cmd.Flags().String("content-type", "", "with --send: the body's Content-Type")
			cmd.Args = cobra.ExactArgs(1)
			cmd.RunE = runE(cmdSign)
		},
	})
}

// namedSchemes are the schemes sign signs: all but the generic hmac,
// whose headers and content come from a Caddyfile.
func namedSchemes() []string {
	return slices.DeleteFunc(verify.Schemes(), func(s string) bool { return s == "hmac" })
}

// cmdSign prints the headers that sign the body, or sends the signed
// body and prints the answer: exit code 0 for a 2xx answer, 1 otherwise.
func cmdSign(cmd *cobra.Command, args []string) (int, error) {
	fl, out := caddycmd.Flags{FlagSet: cmd.Flags()}, cmd.OutOrStdout()
	secret := fl.String("secret")
	if secret == "" {
		secret = os.Getenv("HOOKGATE_SECRET")
	}
	if secret == "" {
		return 1, fmt.Errorf("no secret: pass --secret or set HOOKGATE_SECRET")
	}
	body, err := readBodyArg(args[0], cmd.InOrStdin())
	if err != nil {
		return 1, err
	}
	scheme := fl.String("scheme")
	switch {
	case scheme == "hmac":
		return 1, fmt.Errorf("the generic hmac scheme is configured in a Caddyfile (webhook_verify's hmac block); sign signs the named schemes: %s",
			strings.Join(namedSchemes(), ", "))
	case !slices.Contains(namedSchemes(), scheme):
		hint := ""
		if s := suggest.Closest(scheme, namedSchemes()); s != "" {
			hint = fmt.Sprintf("did you mean %q? ", s)
		}
		return 1, fmt.Errorf("--scheme %q: unknown scheme; %swant one of %s", scheme, hint, strings.Join(namedSchemes(), ", "))
	case scheme == "rfc9421" && fl.String("key-id") == "":
		return 1, fmt.Errorf("scheme rfc9421 names the key it signs with: pass --key-id <keyid>, the keyid the receiver's secret line gives it")
	case scheme == "sns" && fl.String("key-id") == "":
		return 1, fmt.Errorf("scheme sns names the certificate of the key it signs with: pass --key-id <SigningCertURL>, where the certificate is served")
	case scheme == "pubsub" && fl.String("key-id") == "":
		return 1, fmt.Errorf("scheme pubsub's token names a service account: pass --key-id <email>")
	case fl.String("key-id") != "" && scheme != "rfc9421" && scheme != "sns" && scheme != "pubsub":
		return 1, fmt.Errorf("--key-id is for schemes rfc9421, sns and pubsub, not %s", scheme)
	}
	v, err := verify.NewSigner(scheme, secret, fl.String("key-id"))
	if err != nil {
		return 1, err
	}
	id := fl.String("id")
	if id == "" {
		b := make([]byte, 12)
		rand.Read(b)
		id = "msg_" + hex.EncodeToString(b)
	}
	ts := time.Now()
	if t, _ := fl.GetInt64("timestamp"); t != 0 {
		ts = time.Unix(t, 0)
	}

	// The request is built first: twilio and rfc9421 sign its URL, and
	// rfc9421 may cover its headers.
	send, target := fl.String("send"), fl.String("url")
	if target == "" {
		target = send
	}
	switch {
	case target == "" && scheme == "pubsub":
		return 1, fmt.Errorf("scheme pubsub's token names its audience, the push endpoint's URL: pass --url or --send")
	case target == "" && v.SignsURL():
		return 1, fmt.Errorf("scheme %s signs the URL it is sent to: pass --url or --send", scheme)
	}
	h := make(http.Header)
	if json.Valid(body) {
		h.Set("Content-Type", "application/json")
	} else if fl.String("scheme") == "twilio" || fl.String("scheme") == "mailgun" { // they sign any other body as a form's
		h.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if ct := fl.String("content-type"); ct != "" {
		h.Set("Content-Type", ct)
	}
	extra, _ := fl.GetStringArray("header")
	if send == "" && (len(extra) > 0 || fl.String("content-type") != "") {
		// Without --send, nothing would carry them: say so, not ignore them.
		return 1, fmt.Errorf("-H and --content-type are the request's, with --send: pass --send <url>, or leave them out")
	}
	var named []string
	for _, line := range extra {
		name, value, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(name) == "" {
			return 1, fmt.Errorf("-H %q: want 'Name: value'", line)
		}
		named = append(named, strings.TrimSpace(name))
		h.Add(strings.TrimSpace(name), strings.TrimSpace(value))
	}
	sig, signed, err := v.SignMessage(verify.Request{Method: http.MethodPost, URL: target, Header: h, Body: body}, id, ts)
	if err != nil {
		return 1, err
	}
	// The signature's headers replace the request's: an -H of one of them
	// would be dropped unsaid.
	for _, name := range named {
		if slices.ContainsFunc(slices.Collect(maps.Keys(sig)), func(k string) bool { return strings.EqualFold(k, name) }) {
			return 1, fmt.Errorf("-H %s: scheme %s sets this header itself, with the signature; give the delivery ID with --id and the timestamp with --timestamp",
				name, fl.String("scheme"))
		}
	}
	if send == "" {
		printHeaders(out, sig)
		if !bytes.Equal(signed, body) {
			fmt.Fprintf(out, "\n%s\n", signed)
		}
		return 0, nil
	}
	req, err := http.NewRequest(http.MethodPost, send, bytes.NewReader(signed))
	if err != nil {
		return 1, err
	}
	req.Header = h
	for k, vs := range sig {
		req.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(req) //nolint:gosec // G704: the URL is the user's own --send
	if err != nil {
		return 1, err
	}
	defer func() { _ = resp.Body.Close() }() // read to its end below
	fmt.Fprintf(out, "%s %s\n", resp.Proto, resp.Status)
	printHeaders(out, resp.Header)
	fmt.Fprintln(out)
	if _, err := io.Copy(out, resp.Body); err != nil {
		return 1, fmt.Errorf("reading the answer: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		return 1, nil
	}
	return 0, nil
}

func readBodyArg(arg string, stdin io.Reader) ([]byte, error) {
	name, ok := strings.CutPrefix(arg, "@")
	switch {
	case !ok:
		return []byte(arg), nil
	case name == "-":
		return io.ReadAll(stdin)
	default:
		return os.ReadFile(name)
	}
}

func printHeaders(out io.Writer, h http.Header) {
	names := make([]string, 0, len(h))
	for k := range h {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		for _, v := range h[k] {
			fmt.Fprintf(out, "%s: %s\n", k, v)
		}
	}
}
