//go:build !linux

package portcheck

// snapshot finds nothing: only Linux's /proc lists the sockets with the
// inodes that tell this process's from another's.
func snapshot(string) (*sockets, error) { return nil, nil }

func owner(string, uint64) (int, string) { return 0, "" }
