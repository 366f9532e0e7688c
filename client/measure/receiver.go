package measure

import (
	"github.com/iotq/iotq/client"
	"github.com/iotq/iotq/internal/payload"
)

// Observation is what a Receiver learnt from one measurement message.
type Observation struct {
	Header    payload.Header
	RecvNs    int64 // client.Message.Received
	DelayNs   int64 // RecvNs - Header.SendNs (one-way; needs a shared clock)
	Duplicate bool  // the same topic, run and seq was observed before
}

// Receiver observes received messages: delays of first copies and
// duplicates. The zero value is ready to use. Not safe for concurrent use.
type Receiver struct {
	seen                 map[dupKey]bool
	delaysMs             []float64
	measured, duplicates int
}

// dupKey identifies a measurement message: a second copy of the same
// topic, publisher run and sequence number is a duplicate. Another run
// (another Publisher, which draws a new run id) reusing the sequence
// numbers is not. Payloads without a run id (shorter than
// payload.RunHeaderSize, or from an older publisher) have run 0 and fall
// back to topic and seq.
type dupKey struct {
	topic string
	run   uint64
	seq   uint32
}

// Observe looks at m. ok is false when m carries no measurement payload
// (an ordinary message).
func (r *Receiver) Observe(m client.Message) (o Observation, ok bool) {
	h, err := payload.Decode(m.Payload)
	if err != nil {
		return Observation{}, false
	}
	if r.seen == nil {
		r.seen = map[dupKey]bool{}
	}
	o = Observation{Header: h, RecvNs: m.Received.UnixNano()}
	o.DelayNs = o.RecvNs - h.SendNs
	k := dupKey{topic: m.Topic, run: h.RunID, seq: h.Seq}
	o.Duplicate = r.seen[k]
	r.seen[k] = true
	r.measured++
	if o.Duplicate {
		r.duplicates++
	} else {
		r.delaysMs = append(r.delaysMs, float64(o.DelayNs)/1e6)
	}
	return o, true
}

// Measured is the number of measurement messages observed, duplicates
// included.
func (r *Receiver) Measured() int { return r.measured }

// Duplicates is the number of duplicates observed.
func (r *Receiver) Duplicates() int { return r.duplicates }

// DelaysMs returns the one-way delays of first copies in ms, in arrival
// order (a copy).
func (r *Receiver) DelaysMs() []float64 { return append([]float64(nil), r.delaysMs...) }
