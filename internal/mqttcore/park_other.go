// SPDX-License-Identifier: MIT

//go:build !linux

package mqttcore

import (
	"errors"
	"log/slog"
	"time"
)

// poller is Linux only (epoll): elsewhere clients never park. [iotq patch 18]
type poller struct{ resume func(*Client) }

func newPoller(func(*Client), *slog.Logger) (*poller, error) {
	return nil, errors.New("parking idle clients needs Linux (epoll)")
}

func (p *poller) close()                    {}
func (p *poller) arm(*Client) error         { return errors.New("no poller") }
func (p *poller) forget(*clientPark)        {}
func (p *poller) woke(*clientPark)          {}
func (p *poller) handled(*clientPark)       {}
func (p *poller) settle(time.Duration) bool { return true }
