// Namespaces left behind by crashed runs: naming, ownership, removal.

package link

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Namespaces lists the namespaces whose names start with prefix.
func Namespaces(prefix string) ([]string, error) {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	ents, err := os.ReadDir("/run/netns")
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("list namespaces: %w", err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// OwnerPID returns the pid encoded in a namespace name made by Up with
// prefix, or 0.
func OwnerPID(prefix, ns string) int {
	rest, ok := strings.CutPrefix(ns, prefix)
	if !ok {
		return 0
	}
	digits, _, _ := strings.Cut(rest, "-")
	pid, err := strconv.Atoi(digits)
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// Cleanup deletes the namespaces with prefix whose owning process is gone
// (left behind by a crash) and returns their names. Namespaces of live
// processes are left alone.
func Cleanup(ctx context.Context, prefix string) ([]string, error) {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	names, err := Namespaces(prefix)
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, ns := range names {
		pid := OwnerPID(prefix, ns)
		if pid != 0 && pidAlive(pid) && !pidReused(pid, "/run/netns/"+ns) {
			continue
		}
		if out, err := ipCmd(ctx, "netns", "del", ns); err != nil {
			errs = append(errs, fmt.Errorf("delete %s: %s: %w", ns, out, err))
			continue
		}
		removed = append(removed, ns)
	}
	return removed, errors.Join(errs...)
}

// pidAlive reports whether a process with this pid exists.
func pidAlive(pid int) bool {
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}

// pidReused reports whether process pid started after the file at path
// was created: then pid belongs to another process than the one that made
// the file (a namespace left by a crash whose pid was reused).
func pidReused(pid int, path string) bool {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return false
	}
	created := time.Unix(st.Mtim.Unix())
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// Field 22 (starttime, clock ticks since boot) follows the ")" of comm.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return false
	}
	ticks, err := strconv.ParseInt(f[19], 10, 64)
	if err != nil {
		return false
	}
	boot := bootTime()
	if boot.IsZero() {
		return false
	}
	const clkTck = 100 // USER_HZ on Linux
	started := boot.Add(time.Duration(ticks) * time.Second / clkTck)
	return started.After(created.Add(2 * time.Second)) // btime has 1 s resolution
}

// bootTime reads btime from /proc/stat.
func bootTime() time.Time {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return time.Time{}
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			sec, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err == nil {
				return time.Unix(sec, 0)
			}
		}
	}
	return time.Time{}
}
