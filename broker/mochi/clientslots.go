package mochi

// The slots of mqttcore.Client.Attach, one per hook that looks its
// per-client state up on every packet.
const (
	slotFlow = iota
)
