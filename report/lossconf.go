package report

import "slices"

// lossConf is one category on the x axis of a per-repetition figure (E10,
// E11): a name (the path change, the profile) and a loss rate.
type lossConf struct {
	name string
	loss float64
}

func (c lossConf) label() string { return c.name + " " + loss(c.loss) + "%" }

// lossConfsAndTransports lists the configurations of rows, sorted by name
// then loss, and their transports, sorted, each once.
func lossConfsAndTransports[T any](rows []T, conf func(T) lossConf, transport func(T) string) ([]lossConf, []string) {
	var confs []lossConf
	var trs []string
	for _, r := range rows {
		if c := conf(r); !slices.Contains(confs, c) {
			confs = append(confs, c)
		}
		if t := transport(r); !slices.Contains(trs, t) {
			trs = append(trs, t)
		}
	}
	slices.SortFunc(confs, func(a, b lossConf) int {
		if c := cmpStrings(a.name, b.name); c != 0 {
			return c
		}
		return int(a.loss*1000 - b.loss*1000)
	})
	slices.Sort(trs)
	return confs, trs
}
