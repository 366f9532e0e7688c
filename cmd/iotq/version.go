package main

import (
	"context"
	"fmt"

	"github.com/iotq/iotq/internal/buildinfo"
)

func (a *app) versionCommand() *Command {
	c := &Command{
		Name:      "version",
		UsageLine: "iotq version",
		Short:     "print iotq, Go and dependency versions",
		Long:      "Version prints the iotq version and commit, the Go version and the versions of the protocol libraries iotq was built with.",
		Flags:     newFlagSet("version"),
	}
	c.Run = runE(func(ctx context.Context, args []string) error {
		if len(args) > 0 {
			return usageErrorf("unexpected argument %q: iotq version takes none", args[0])
		}
		bi := buildinfo.Read()
		fmt.Fprintf(a.stdout, "iotq %s (commit %s)\n%s\n", bi.Version, bi.Commit, bi.GoVersion)
		for _, d := range bi.Deps {
			fmt.Fprintf(a.stdout, "%s %s\n", d.Path, d.Version)
		}
		return nil
	})
	return c
}
