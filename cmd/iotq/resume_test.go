package main

import "testing"

// TestResumeCommandKeepsTheSelection: the command printed after an
// interrupted run repeats every flag that shapes the campaign's cells, or
// --resume would find a different campaign in the directory.
func TestResumeCommandKeepsTheSelection(t *testing.T) {
	for _, c := range []struct {
		args []string
		dir  string
		want string
	}{
		{[]string{"e2", "--directions", "egress,both", "--no-pcap", "--shard", "1/2", "--jobs", "54", "--out", "r/e2-s1"}, "r/e2-s1",
			"iotq lab run e2 --directions egress,both --no-pcap --shard 1/2 --jobs 54 --out r/e2-s1 --resume"},
		{[]string{"e4", "--repetitions", "10", "--resume"}, "results/e4-full",
			"iotq lab run e4 --repetitions 10 --resume --out results/e4-full"},
		{[]string{"my scenario.yaml"}, "results/x",
			"iotq lab run 'my scenario.yaml' --out results/x --resume"},
	} {
		if got := resumeCommand(c.args, c.dir); got != c.want {
			t.Errorf("resumeCommand(%q)\n got %s\nwant %s", c.args, got, c.want)
		}
	}
}
