package mochi

import (
	"sync"

	"github.com/iotq/iotq/internal/mqttcore"
)

// clientMap holds a hook's state per connected client. Hooks look their
// state up on every packet, from the readers of many clients at once; a
// map behind one RWMutex made every lookup write the lock's shared reader
// count, a cache line that then moved between cores on every packet.
// sync.Map's Load writes nothing shared.
type clientMap[V any] struct {
	m sync.Map // *mqttcore.Client -> V
}

func (c *clientMap[V]) load(cl *mqttcore.Client) (V, bool) {
	v, ok := c.m.Load(cl)
	if !ok {
		var zero V
		return zero, false
	}
	return v.(V), true
}

func (c *clientMap[V]) store(cl *mqttcore.Client, v V) { c.m.Store(cl, v) }

func (c *clientMap[V]) loadAndDelete(cl *mqttcore.Client) (V, bool) {
	v, ok := c.m.LoadAndDelete(cl)
	if !ok {
		var zero V
		return zero, false
	}
	return v.(V), true
}

func (c *clientMap[V]) delete(cl *mqttcore.Client) { c.m.Delete(cl) }

// each calls f for every client until f returns false.
func (c *clientMap[V]) each(f func(*mqttcore.Client, V) bool) {
	c.m.Range(func(k, v any) bool { return f(k.(*mqttcore.Client), v.(V)) })
}
