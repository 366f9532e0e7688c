package lab

import "github.com/iotq/iotq/internal/yamlconf"

// parseSpecs decodes every document of a scenario stream (ParseSpecs
// without its checks of the whole file: the built-ins may hold several
// documents of one experiment). The format and its error messages are
// internal/yamlconf's, as for the broker's and the gateway's
// configuration files.
func parseSpecs(name string, data []byte) ([]Spec, error) {
	return yamlconf.ParseAll[Spec](name, data, scenarioFormat())
}

// scenarioFormat tunes yamlconf's messages to scenario files. The types
// are named as the YAML decoder names them ("[]lab.Duration" is described
// from "lab.Duration").
func scenarioFormat() yamlconf.Options {
	return yamlconf.Options{
		Document: "a scenario document",
		TopKeys:  "experiment:, profiles:, losses:, transports:, ...; scenarios/example.yaml has every field",
		Expect: map[string]string{
			"lab.Duration":        "a duration such as 25ms or 1.5s",
			"lab.Rate":            "a rate such as 20mbit or 512kbit",
			"lab.Percent":         `a loss in percent such as 5 or "2.5%"`,
			"records.EarlyPolicy": "accept, hold or refuse",
		},
	}
}
