package main

import (
	"context"
	"errors"
	"flag"
)

// reportCommand is a placeholder until the report subcommand lands.
func (a *app) reportCommand() *Command {
	return &Command{
		Name:      "report",
		UsageLine: "iotq report [flags]",
		Short:     "report (not implemented yet)",
		Long:      "Not implemented yet.",
		Flags: func(fs *flag.FlagSet) func(context.Context, []string) error {
			return func(ctx context.Context, args []string) error {
				return errors.New("not implemented yet")
			}
		},
	}
}
