// Command hookgate is Caddy with the standard modules and hookgate's own:
// `hookgate run|adapt|validate|list-modules` behave as Caddy's, plus
// hookgate's subcommands such as `hookgate sign`.
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"
	_ "github.com/hookgate/hookgate/caddymodule"
)

func main() {
	caddycmd.Main()
}
