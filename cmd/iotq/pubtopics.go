package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/iotq/iotq/client/measure"
	"github.com/iotq/iotq/records"
)

// topicFlags are iotq pub's multi-topic flags (E9: --topics, --large-size,
// --large-interval).
type topicFlags struct {
	topics        int
	largeSize     int
	largeInterval time.Duration
}

func (f *topicFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&f.topics, "topics", 0, "publish on `N` topics TOPIC/0..N-1 over one connection, each -n messages every --interval, phases spread over the interval (needs --size)")
	fs.IntVar(&f.largeSize, "large-size", 0, "with --topics: also publish `BYTES`-byte messages on TOPIC/large every --large-interval")
	fs.DurationVar(&f.largeInterval, "large-interval", 0, "with --topics and --large-size: the large-message topic's interval")
}

// on reports whether any multi-topic flag was given.
func (f *topicFlags) on() bool { return f.topics != 0 || f.largeSize != 0 || f.largeInterval != 0 }

// conflicts returns the usage error of a multi-topic run beside flags it
// does not combine with, nil when it combines. set says which flags were
// given.
func (f *topicFlags) conflicts(set map[string]bool, size int, interval time.Duration) error {
	if f.topics <= 0 {
		if f.topics < 0 {
			return usageErrorf("--topics %d: want at least 1", f.topics)
		}
		return usageErrorf("--large-size and --large-interval go with --topics N (the large-message topic is published beside N periodic topics)")
	}
	var bad []string
	for _, name := range []string{"m", "f", "s", "gate", "closed-loop", "early", "reconnect", "r", "property", "message-id"} {
		if !set[name] {
			continue
		}
		if len(name) == 1 {
			bad = append(bad, "-"+name)
		} else {
			bad = append(bad, "--"+name)
		}
	}
	switch {
	case len(bad) > 0:
		return usageErrorf("--topics publishes measurement payloads (--size N) every --interval on each topic: it does not combine with %s", strings.Join(bad, ", "))
	case size <= 0:
		return usageErrorf("--topics needs --size N: each topic's messages are measurement payloads (seq counts across the topics)")
	case interval <= 0:
		return usageErrorf("--topics needs a positive --interval: each topic publishes every interval, their phases spread over it")
	case f.topics > records.MaxTopics:
		return usageErrorf("--topics %d: want at most %d", f.topics, records.MaxTopics)
	case f.largeSize < 0:
		return usageErrorf("--large-size %d: must not be negative", f.largeSize)
	case (f.largeSize > 0) != (f.largeInterval > 0):
		return usageErrorf("--large-size and --large-interval go together: give both (for example --large-size 65536 --large-interval 2s) or neither")
	}
	return nil
}

// publishTopics runs a multi-topic publisher: connects, publishes the
// schedule, writes records and --stats, and turns the summary into the
// exit status.
func (a *app) publishTopics(ctx context.Context, cf *clientFlags, f topicFlags, base string, size, count int, interval time.Duration, waitAcks bool, timeout time.Duration) error {
	mo := measure.MultiTopicOptions{Topic: base, Topics: f.topics, QoS: byte(cf.qos), Size: size, Count: count,
		Interval: interval, LargeSize: f.largeSize, LargeInterval: f.largeInterval}
	if waitAcks {
		mo.AckWait = timeout
	}
	var recs *records.Writer[records.PubRecord]
	if cf.records != "" {
		var err error
		if recs, err = createRecords[records.PubRecord](cf.records); err != nil {
			return err
		}
		mo.OnResult = func(r measure.Result) { _ = recs.Write(pubRecord(r)) }
	}
	p, err := measure.NewMultiPublisher(mo)
	if err != nil {
		recs.Close()
		return usageErrorf("%s", strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	runErr := func() error {
		c, dialDur, err := connect(ctx, cf, timeout, nil)
		if err != nil {
			return err
		}
		defer c.Close()
		sum := p.Run(ctx, c)
		info := c.ConnectionInfo()
		c.Close()
		if cf.stats == "json" {
			printStats(a.stdout, records.PubStats{ConnectionStats: connectionStats(info, dialDur), Role: records.RolePub,
				Topic: base + "/#", QoS: cf.qos, Size: size, Sent: sum.Sent, Acked: sum.Acked, Failed: sum.Failed,
				FirstSendNs: sum.FirstSendNs, LastAcceptedNs: sum.LastAcceptedNs})
		}
		if sum.Failed == 0 && (ctx.Err() != nil || sum.Sent == p.Messages()) {
			return nil
		}
		msg := fmt.Sprintf("sent %d of %d messages on %d topics, %d not accepted", sum.Sent, p.Messages(), f.topics+min(1, f.largeSize), sum.Failed)
		switch {
		case sum.FirstErr != nil:
			msg += fmt.Sprintf("; first error: %v", sum.FirstErr)
		case c.Err() != nil:
			msg += fmt.Sprintf("; %v", c.Err())
		}
		return &exitError{code: exitFailure, msg: msg}
	}()
	if err := recs.Close(); err != nil && runErr == nil {
		runErr = err
	}
	return runErr
}
