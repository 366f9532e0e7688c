package lab

// e11Specs returns the built-in E11 (docs/experiments.md) and its tiny
// variant for the tests (e11-smoke: one wifi cell per transport, a 15 s
// stream, one repetition: a reconnect to a survivor can wait seconds
// while NATS moves the session's stream leader).
func e11Specs() (full, smoke Spec) {
	full = Spec{
		Experiment:  "E11",
		Description: "behind a cluster: a QoS 1 stream to a three-node NATS cluster (JetStream, MQTT), the publisher's node killed half-way (t = 30 s); MQTT over QUIC through iotq gateway (client_hash) vs MQTT over TCP+TLS straight to a node; publisher link impaired both ways",
		Topology:    TopologySpec{Kind: KindPubBrokerSub, Impaired: ImpairedPublisher, Directions: []string{DirectionBoth}},
		Profiles:    []string{"wifi", "cellular", "satellite"},
		Delay:       DelayRTT,
		Losses:      []Percent{0, 2},
		Transports:  []string{TransportTLS, TransportQUIC},
		QoS:         []int{1},
		// 600 messages at 100 ms: a 60 s stream, the kill at t = 30 s
		PayloadSizes: []int{100},
		Patterns:     []string{PatternFailover},
		Intervals:    []Duration{ms(100)},
		Messages:     600,
		Repetitions:  5,
		Scales: map[string]ScaleSpec{
			ScaleSmoke:   {Messages: 60, Repetitions: 2},
			ScaleReduced: {Messages: 200, Repetitions: 3},
		},
	}
	smoke = full
	smoke.Description = "E11's tiny variant for the tests: wifi, 0 % loss, a 15 s stream (kill at 7.5 s), one repetition"
	smoke.Profiles, smoke.Losses = []string{"wifi"}, []Percent{0}
	smoke.Messages, smoke.Repetitions = 150, 1
	smoke.Scales = nil
	return full, smoke
}
