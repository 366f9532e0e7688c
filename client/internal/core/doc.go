// Package core holds the types shared by the common client API (package
// client) and its protocol implementations (client/mqtt, later client/coap
// and client/amqp). Package client re-exports every name here as an alias;
// users import client, never core. The split exists only to break the import
// cycle between client.Dial and the implementations it picks.
//
// Concurrency: Receipt is safe for concurrent use; its completion function
// may be called from any goroutine, any number of times (the first call
// wins). Options and the other value types are plain data.
package core
