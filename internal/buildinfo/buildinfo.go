// Package buildinfo reports the iotq version, commit, Go version and the
// versions of key dependencies, for `iotq version` and lab manifests.
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// Version is the iotq release. Overridable with -ldflags "-X".
var Version = "0.1.0-dev"

// Engine names the MQTT engine, which is part of this module: a fork of
// mochi-mqtt/server at the tag below (internal/mqttcore/PATCHES.md).
const Engine = "internal/mqttcore, forked from mochi-mqtt/server v2.7.9"

// Dep is one module dependency.
type Dep struct {
	Path    string `json:"path"`
	Version string `json:"version"`
}

// Info describes the running binary.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	GoVersion string `json:"go_version"`
	Deps      []Dep  `json:"deps"`
}

// keyDeps are the modules whose versions shape measurements.
var keyDeps = []string{
	"github.com/quic-go/quic-go",
	"github.com/Azure/go-amqp",
	"github.com/plgd-dev/go-coap/v3",
	"github.com/pion/dtls/v3",
	"github.com/eclipse/paho.mqtt.golang",
	"github.com/eclipse/paho.golang",
}

// Read returns the build information of the running binary.
func Read() Info {
	info := Info{Version: Version, Commit: "unknown", GoVersion: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return info
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" {
			info.Commit = s.Value
		}
	}
	for _, d := range bi.Deps {
		for _, k := range keyDeps {
			if d.Path == k {
				info.Deps = append(info.Deps, Dep{Path: d.Path, Version: d.Version})
			}
		}
	}
	return info
}

// DepVersion returns the version of the module whose path ends with suffix,
// or "unknown".
func (i Info) DepVersion(suffix string) string {
	for _, d := range i.Deps {
		if strings.HasSuffix(d.Path, suffix) {
			return d.Version
		}
	}
	return "unknown"
}
