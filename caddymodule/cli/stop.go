package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/hookgate/hookgate/caddymodule"
)

// stopCommand is Caddy's stop, which returns once the gateway has stopped
// its apps but before its process exits, made to wait for the exit: a
// restore (stop, then put a backup in place of the store's file) must not
// race the process it stops.
func stopCommand(c caddycmd.Command) *cobra.Command {
	cmd := toCobra(c)
	cmd.Short = "Stops a running gateway, and waits for its process to exit"
	cmd.Long = `
Stops the running gateway as gracefully as possible, through its admin
API's /stop endpoint (--address, or the admin address of --config, else
localhost:2019), then waits until its process has exited, for at most
--timeout: once it returns, the gateway holds no file and no port, so a
backup can be put in place of its store's file. The exit code is 0 when
the process has exited, 1 when it still runs at the timeout or the stop
failed. A gateway reached on another host, or one that does not say its
process ID, is stopped without waiting, and the command says so.`
	cmd.Flags().Duration("timeout", time.Minute, "how long to wait for the gateway's process to exit")
	cmd.RunE = runE(cmdStop)
	return cmd
}

// cmdStop learns the gateway's process ID, stops it, and waits for its
// process to exit.
func cmdStop(cmd *cobra.Command, _ []string) (int, error) {
	address, _ := cmd.Flags().GetString("address")
	config, _ := cmd.Flags().GetString("config")
	adapter, _ := cmd.Flags().GetString("adapter")
	timeout, _ := cmd.Flags().GetDuration("timeout")
	if timeout <= 0 {
		return 1, fmt.Errorf("--timeout %s: want a positive duration", timeout)
	}
	admin, err := caddycmd.DetermineAdminAPIAddress(address, nil, config, adapter)
	if err != nil {
		return 1, fmt.Errorf("couldn't determine admin API address: %v", err)
	}
	pid, why := gatewayPID(admin)
	resp, err := caddycmd.AdminAPIRequest(admin, http.MethodPost, "/stop", nil, nil)
	if err != nil {
		return 1, fmt.Errorf("is the gateway running with its admin API on %s? %w", admin, err)
	}
	_ = resp.Body.Close() // its answer is its status
	if pid == 0 {
		fmt.Fprintf(cmd.ErrOrStderr(), "the gateway stopped; %s, so this did not wait for its process to exit\n", why)
		return 0, nil
	}
	for deadline := time.Now().Add(timeout); !exited(pid); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			return 1, fmt.Errorf("the gateway stopped, but its process (%d) still runs after %s: it may still hold its store file and ports", pid, timeout)
		}
	}
	return 0, nil
}

// gatewayPID returns the process ID of the gateway at the admin address,
// as it publishes it (caddymodule.PIDVar in /debug/vars), or 0 and why
// not: a gateway on another host (a process ID there means nothing here),
// or one that does not publish it.
func gatewayPID(admin string) (int, string) {
	na, err := caddy.ParseNetworkAddress(admin)
	if err != nil {
		return 0, "its admin address does not parse"
	}
	if !na.IsUnixNetwork() {
		host := na.Host
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return 0, "its admin API is on another host (" + host + ")"
		}
	}
	resp, err := caddycmd.AdminAPIRequest(admin, http.MethodGet, "/debug/vars", nil, nil)
	if err != nil {
		return 0, "its process ID could not be read (" + err.Error() + ")"
	}
	defer func() { _ = resp.Body.Close() }() // read below
	var vars map[string]json.RawMessage
	var pid int
	if json.NewDecoder(resp.Body).Decode(&vars) != nil || json.Unmarshal(vars[caddymodule.PIDVar], &pid) != nil || pid <= 0 {
		return 0, "it does not publish its process ID (not a hookgate?)"
	}
	return pid, ""
}

// exited reports whether process pid has exited: it is gone, or a zombie
// (exited, not yet reaped by its parent; on Linux, which shows it in /proc).
func exited(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return true
	}
	defer func() { _ = p.Release() }()
	if errors.Is(p.Signal(syscall.Signal(0)), os.ErrProcessDone) {
		return true
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false // not Linux: the signal says it runs
	}
	// "pid (comm) state ...", where comm may hold spaces and parentheses.
	state := strings.TrimSpace(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	return strings.HasPrefix(state, "Z")
}
