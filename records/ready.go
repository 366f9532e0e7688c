package records

import (
	"encoding/json"
	"fmt"
	"github.com/iotq/iotq/internal/atomicfile"
	"os"
)

// BrokerReady is the ready file of a server (`iotq broker --ready-file`,
// the gateway's ready_file), written once every listener accepts: the
// listener URLs with their real ports, the CA file that signs the server's
// certificate, and its pid. The lab reads broker and gateway alike.
type BrokerReady struct {
	Listeners []string `json:"listeners"`
	CAFile    string   `json:"ca_file"`
	PID       int      `json:"pid"`
}

// SubReady is the content of sub's ready file (`iotq sub --ready-file`),
// written once the broker granted every subscription.
const SubReady = "ready\n"

// WriteServerReady writes the ready file of this process's server
// atomically: its listeners, its CA file ("" if none) and its pid.
func WriteServerReady(path string, listeners []string, caFile string) error {
	if err := WriteJSONAtomic(path, BrokerReady{Listeners: listeners, CAFile: caFile, PID: os.Getpid()}); err != nil {
		return fmt.Errorf("ready file: %w", err)
	}
	return nil
}

// ParseBrokerReady reads a broker ready file's content; it fails until the
// file names at least one listener.
func ParseBrokerReady(b []byte) (BrokerReady, error) {
	var r BrokerReady
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("broker ready file: %w", err)
	}
	if len(r.Listeners) == 0 {
		return r, fmt.Errorf("broker ready file lists no listener")
	}
	return r, nil
}

// WriteJSONAtomic writes v as indented JSON with WriteFileAtomic.
func WriteJSONAtomic(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	return WriteFileAtomic(path, append(b, '\n'))
}

// WriteFileAtomic writes data to path through a temporary file in the same
// directory, synced and renamed (internal/atomicfile), so a reader (or an
// interrupted run) never sees half a file. The file is readable by
// everyone (0644).
func WriteFileAtomic(path string, data []byte) error {
	return atomicfile.WriteFile(path, data, 0o644)
}
