// Command hookgate is Caddy with the standard modules and hookgate's own:
// `hookgate run|adapt|validate|list-modules` behave as Caddy's, plus
// hookgate's subcommands such as `hookgate sign` and `hookgate dlq`.
package main

import (
	_ "github.com/caddyserver/caddy/v2/modules/standard"
	_ "github.com/hookgate/hookgate/caddymodule"
	"github.com/hookgate/hookgate/caddymodule/cli"
)

func main() {
	cli.Main()
}
