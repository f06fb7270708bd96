package portcheck

import (
	"errors"
	"io/fs"
	"maps"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"github.com/prometheus/procfs"
)

// tcpListen is TCP_LISTEN, the st column of a listening socket in
// /proc/net/tcp.
const tcpListen = 0x0A

// snapshot reads the listening TCP sockets and this process's socket
// inodes. The inodes are read before and after the sockets, and both
// kept: a listener this process opens or closes meanwhile (a reload) is
// still known as ours.
//
// procfs marks NetTCP deprecated in favour of netlink's sock_diag, which
// would mean hand-writing its messages; /proc/net/tcp is a stable kernel
// interface (proc(5)), and procfs parses it.
func snapshot() (*sockets, error) {
	pfs, err := procfs.NewDefaultFS()
	if err != nil {
		return nil, err
	}
	self, err := pfs.Self()
	if err != nil {
		return nil, err
	}
	ours, err := socketInodes(self)
	if err != nil {
		return nil, err
	}
	s := &sockets{ours: ours}
	for _, read := range []func() (procfs.NetTCP, error){pfs.NetTCP, pfs.NetTCP6} { //nolint:staticcheck // see above
		lines, err := read()
		if errors.Is(err, fs.ErrNotExist) {
			continue // a kernel without IPv6
		}
		if err != nil {
			return nil, err
		}
		for _, l := range lines {
			ip, ok := netip.AddrFromSlice(l.LocalAddr)
			if l.St != tcpListen || !ok || l.LocalPort > 0xFFFF {
				continue
			}
			s.listeners = append(s.listeners, listener{addr: netip.AddrPortFrom(ip.Unmap(), uint16(l.LocalPort)), inode: l.Inode})
		}
	}
	after, err := socketInodes(self)
	if err != nil {
		return nil, err
	}
	maps.Copy(s.ours, after)
	return s, nil
}

// socketInodes is the inodes of p's sockets, from the "socket:[inode]"
// links of /proc/<pid>/fd.
func socketInodes(p procfs.Proc) (map[uint64]bool, error) {
	targets, err := p.FileDescriptorTargets()
	if err != nil {
		return nil, err
	}
	inodes := map[uint64]bool{}
	for _, t := range targets {
		if s, ok := strings.CutPrefix(t, "socket:["); ok {
			if n, err := strconv.ParseUint(strings.TrimSuffix(s, "]"), 10, 64); err == nil {
				inodes[n] = true
			}
		}
	}
	return inodes, nil
}

// owner is the process that holds the socket inode, and its command
// name, as far as /proc lets this process see; 0 and "" otherwise.
func owner(inode uint64) (int, string) {
	procs, err := procfs.AllProcs()
	if err != nil {
		return 0, ""
	}
	for _, p := range procs {
		if p.PID == os.Getpid() {
			continue
		}
		inodes, err := socketInodes(p)
		if err != nil || !inodes[inode] {
			continue
		}
		comm, _ := p.Comm()
		return p.PID, comm
	}
	return 0, ""
}
