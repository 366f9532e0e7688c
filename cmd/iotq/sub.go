package main

import (
	"context"
	"errors"
	"flag"
)

// subCommand is a placeholder until the sub subcommand lands.
func (a *app) subCommand() *Command {
	return &Command{
		Name:      "sub",
		UsageLine: "iotq sub [flags]",
		Short:     "sub (not implemented yet)",
		Long:      "Not implemented yet.",
		Flags: func(fs *flag.FlagSet) func(context.Context, []string) error {
			return func(ctx context.Context, args []string) error {
				return errors.New("not implemented yet")
			}
		},
	}
}
