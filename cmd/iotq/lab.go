package main

import (
	"context"
	"errors"
	"flag"
)

// labCommand is a placeholder until the lab subcommand lands.
func (a *app) labCommand() *Command {
	return &Command{
		Name:      "lab",
		UsageLine: "iotq lab [flags]",
		Short:     "lab (not implemented yet)",
		Long:      "Not implemented yet.",
		Flags: func(fs *flag.FlagSet) func(context.Context, []string) error {
			return func(ctx context.Context, args []string) error {
				return errors.New("not implemented yet")
			}
		},
	}
}
