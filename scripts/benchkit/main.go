package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	cmds := map[string]func([]string) error{
		"freeport":  cmdFreePort,
		"waitport":  cmdWaitPort,
		"gen":       cmdGen,
		"lat":       cmdLat,
		"idle":      cmdIdle,
		"summarize": cmdSummarize,
	}
	run, ok := cmds[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "benchkit: unknown subcommand %q\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	if err := run(os.Args[2:]); err != nil {
		fmt.Fprintf(os.Stderr, "benchkit %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, `usage: benchkit SUBCOMMAND [flags]   (SUBCOMMAND -h for its flags)
  freeport    print a free TCP port on 127.0.0.1
  waitport    wait until HOST:PORT accepts TCP connections
  gen         write N timestamped payload lines for mosquitto_pub -l
  lat         count received messages, throughput and latency from mosquitto_sub output
  idle        hold N idle MQTT connections until standard input closes
  summarize   medians and ratios from runs.csv and idle.csv`)
}
