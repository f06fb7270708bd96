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

// The st column of /proc/net/tcp and udp: a listening TCP socket, and a
// UDP socket that is not connected (TCP_CLOSE), which a server's is.
const (
	tcpListen = 0x0A
	udpClose  = 0x07
)

// snapshot reads the listening TCP sockets, the bound unconnected UDP
// sockets, and this process's socket inodes from the proc file system
// mounted at proc. The inodes are read before and after the sockets, and
// both kept: a listener this process opens or closes meanwhile (a
// reload) is still known as ours.
//
// procfs marks NetTCP deprecated in favour of netlink's sock_diag, which
// would mean hand-writing its messages; /proc/net/tcp is a stable kernel
// interface (proc(5)), and procfs parses it.
func snapshot(proc string) (*sockets, error) {
	pfs, err := procfs.NewFS(proc)
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
	tables := []struct {
		udp  bool
		read func() (procfs.NetTCP, error)
	}{
		{false, pfs.NetTCP},  //nolint:staticcheck // see above
		{false, pfs.NetTCP6}, //nolint:staticcheck // see above
		{true, func() (procfs.NetTCP, error) { l, err := pfs.NetUDP(); return procfs.NetTCP(l), err }},
		{true, func() (procfs.NetTCP, error) { l, err := pfs.NetUDP6(); return procfs.NetTCP(l), err }},
	}
	for _, table := range tables {
		lines, err := table.read()
		if errors.Is(err, fs.ErrNotExist) {
			continue // a kernel without IPv6
		}
		if err != nil {
			return nil, err
		}
		for _, l := range lines {
			ip, ok := netip.AddrFromSlice(l.LocalAddr)
			if !ok || l.LocalPort > 0xFFFF {
				continue
			}
			if table.udp && (l.St != udpClose || l.RemPort != 0) || !table.udp && l.St != tcpListen {
				continue
			}
			s.listeners = append(s.listeners, listener{udp: table.udp, addr: netip.AddrPortFrom(ip.Unmap(), uint16(l.LocalPort)), inode: l.Inode})
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
// name, as far as the proc file system at proc lets this process see; 0
// and "" otherwise.
func owner(proc string, inode uint64) (int, string) {
	pfs, err := procfs.NewFS(proc)
	if err != nil {
		return 0, ""
	}
	procs, err := pfs.AllProcs()
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
