package main

import (
	"context"
	"errors"
	"flag"
)

// linkCommand is a placeholder until the link subcommand lands.
func (a *app) linkCommand() *Command {
	return &Command{
		Name:      "link",
		UsageLine: "iotq link [flags]",
		Short:     "link (not implemented yet)",
		Long:      "Not implemented yet.",
		Flags: func(fs *flag.FlagSet) func(context.Context, []string) error {
			return func(ctx context.Context, args []string) error {
				return errors.New("not implemented yet")
			}
		},
	}
}
