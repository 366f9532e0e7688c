module github.com/mochi-mqtt/server/v2

go 1.21

require (
	github.com/gorilla/websocket v1.5.3
	github.com/rs/xid v1.4.0
	go.etcd.io/bbolt v1.3.11
)
