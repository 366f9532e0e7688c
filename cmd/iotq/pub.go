package main

import (
	"context"
	"errors"
	"flag"
)

// pubCommand is a placeholder until the pub subcommand lands.
func (a *app) pubCommand() *Command {
	return &Command{
		Name:      "pub",
		UsageLine: "iotq pub [flags]",
		Short:     "pub (not implemented yet)",
		Long:      "Not implemented yet.",
		Flags: func(fs *flag.FlagSet) func(context.Context, []string) error {
			return func(ctx context.Context, args []string) error {
				return errors.New("not implemented yet")
			}
		},
	}
}
