package main

// commandTable lists the subcommands in help order. Each one is defined in
// its own file named after it; keep this list the only place that names them.
func (a *app) commandTable() []*Command {
	return []*Command{
		a.brokerCommand(),
		a.gatewayCommand(),
		a.pubCommand(),
		a.subCommand(),
		a.linkCommand(),
		a.labCommand(),
		a.reportCommand(),
		a.versionCommand(),
	}
}
