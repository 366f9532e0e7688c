package report

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// FuzzResultFiles feeds arbitrary bytes to the CSV readers through
// Generate: whatever the files hold, the report must not panic.
func FuzzResultFiles(f *testing.F) {
	f.Add([]byte("cell,rep,seq,send_ns,recv_ns\nc,0,1,10,20\n"), []byte("cell,rep,role,dial_start_ns\nc,0,pub,5\nc,0,pub-resume,7\n"))
	f.Add([]byte("cell,rep,seq,send_ns,recv_ns,delay_ns\nE5_wifi_loss0_reconnect_qos1_10B_quic,x,,NaN,-1,\"\n"), []byte("\xff\xfe"))
	f.Add([]byte(""), []byte("cell\n\n\n"))
	f.Fuzz(func(t *testing.T, msgs, conns []byte) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "messages.csv"), msgs, 0o644)
		os.WriteFile(filepath.Join(dir, "connections.csv"), conns, 0o644)
		os.WriteFile(filepath.Join(dir, "completions.csv"), msgs, 0o644)
		os.WriteFile(filepath.Join(dir, "links.csv"), conns, 0o644)
		_, _ = Generate(context.Background(), Options{Dir: dir, Out: filepath.Join(dir, "out"), NoFigures: true, Resamples: 10})
	})
}
