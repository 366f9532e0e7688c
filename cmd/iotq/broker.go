package main

import (
	"context"
	"errors"
	"flag"
)

// brokerCommand is a placeholder until the broker subcommand lands.
func (a *app) brokerCommand() *Command {
	return &Command{
		Name:      "broker",
		UsageLine: "iotq broker [flags]",
		Short:     "broker (not implemented yet)",
		Long:      "Not implemented yet.",
		Flags: func(fs *flag.FlagSet) func(context.Context, []string) error {
			return func(ctx context.Context, args []string) error {
				return errors.New("not implemented yet")
			}
		},
	}
}
