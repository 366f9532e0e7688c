package main

// commandTable lists the subcommands in help order. Each entry is defined in
// its own file (broker.go, pub.go, sub.go, link.go, lab.go, report.go, ...).
func (a *app) commandTable() []*Command {
	return []*Command{
		a.versionCommand(),
	}
}
