package mqtt

import "crypto/tls"

// newFileSessionCache returns the ticket cache persisted at path.
// TODO(client): use transport.NewFileSessionCache once it lands.
func newFileSessionCache(path string) (tls.ClientSessionCache, error) {
	_ = path
	return tls.NewLRUClientSessionCache(8), nil
}
