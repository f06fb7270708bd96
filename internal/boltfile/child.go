package boltfile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strings"
	"time"
)

// CheckInChild runs bbolt's consistency check of the file at path, if
// there is one, in a child process: some damage makes bbolt's check fault
// on a goroutine of its own, where no recover reaches, or loop for ever.
// In the child, either ends the child: a crash, or a check not done within
// limit (0: a minute, and 30s per GiB), is ErrCorrupt; a lock not had
// within lockTimeout is ErrLocked. A missing or empty file is sound (bbolt
// initialises it).
//
// The child is this very binary, run again with childEnv set: any binary
// that links this package (hookgate, a Caddy built with xcaddy, a program
// of yours, a test binary) runs the check in init, before its own main.
// Where no child can run (the binary is gone, exec is not allowed), the
// check runs in this process.
func CheckInChild(path string, lockTimeout, limit time.Duration) error {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && fi.Size() == 0) {
		return nil
	}
	if err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return checkHere(path, lockTimeout)
	}
	if limit <= 0 {
		limit = time.Minute + time.Duration(fi.Size()>>30)*30*time.Second
	}
	// The child stops itself at the limit (a parent killed meanwhile
	// leaves no check running); the parent kills it a little later.
	ctx, cancel := context.WithTimeout(context.Background(), lockTimeout+limit+5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), childEnv+"="+lockTimeout.String()+","+limit.String()+","+path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	msg := strings.TrimSpace(stderr.String())
	if len(msg) > 1000 {
		msg = msg[:1000] + "…"
	}
	var exit *exec.ExitError
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil, errors.As(err, &exit) && exit.ExitCode() == childExitTimeout:
		return fmt.Errorf("%w: its check did not finish within %s: damaged pages that lead back to each other, "+
			"or a disk too slow for the limit (`hookgate store check --timeout <longer>` tells them apart)", ErrCorrupt, limit)
	case !errors.As(err, &exit):
		return checkHere(path, lockTimeout)
	case exit.ExitCode() == childExitLocked:
		return fmt.Errorf("%w: %s", ErrLocked, msg)
	case exit.ExitCode() == childExitCorrupt:
		return fmt.Errorf("%w: %s", ErrCorrupt, strings.TrimPrefix(msg, ErrCorrupt.Error()+": "))
	case exit.ExitCode() == 1:
		return errors.New(msg)
	}
	// Killed by a fault reading a damaged page: name it, not the dump.
	why := "it crashed"
	for line := range strings.Lines(msg) {
		if strings.HasPrefix(line, "fatal error:") || strings.HasPrefix(line, "panic:") || strings.HasPrefix(line, "unexpected fault") {
			why += ": " + strings.TrimSpace(line)
			break
		}
	}
	return fmt.Errorf("%w: its check read a damaged page and %s", ErrCorrupt, why)
}

// The child's environment variable, "<lock timeout>,<limit>,<path>", and
// its exit codes besides 0 (sound) and 1 (another error, on stderr).
const (
	childEnv         = "HOOKGATE_STORE_CHECK_CHILD"
	childExitLocked  = 3
	childExitCorrupt = 4
	childExitTimeout = 5
)

func init() {
	if v, ok := os.LookupEnv(childEnv); ok {
		os.Exit(child(v))
	}
}

// child checks the file CheckInChild named and returns the exit code.
func child(v string) int {
	parts := strings.SplitN(v, ",", 3)
	var lockTimeout, limit time.Duration
	var err error
	if len(parts) == 3 {
		if lockTimeout, err = time.ParseDuration(parts[0]); err == nil {
			limit, err = time.ParseDuration(parts[1])
		}
	}
	if len(parts) != 3 || err != nil {
		fmt.Fprintf(os.Stderr, "%s: want <lock timeout>,<limit>,<path>\n", childEnv)
		return 1
	}
	time.AfterFunc(lockTimeout+limit, func() { os.Exit(childExitTimeout) })
	err = checkHere(parts[2], lockTimeout)
	if err == nil {
		return 0
	}
	fmt.Fprintln(os.Stderr, err)
	switch {
	case errors.Is(err, ErrLocked):
		return childExitLocked
	case errors.Is(err, ErrCorrupt):
		return childExitCorrupt
	}
	return 1
}

// checkHere checks the file in this process.
func checkHere(path string, lockTimeout time.Duration) error {
	db, err := OpenFile(path, lockTimeout, true, true)
	if err != nil {
		return err
	}
	return db.Close()
}
