package config

// MaxReceiveBuffer bounds a UDP listener's receive_buffer (bytes, per
// socket: a listener has one socket per event loop). Larger is no buffer
// a loop drains in time, only memory held, and near 2 GiB the kernel's
// doubling of SO_RCVBUF overflows an int.
const MaxReceiveBuffer = 1 << 30

// decodeReceiveBuffer reads receive_buffer, a UDP listener's SO_RCVBUF.
func decodeReceiveBuffer(t *table, l *Listener, udp bool, notUDP string) {
	if !t.misplaced("receive_buffer", udp, "%s: a TCP listener's buffers are per connection, sized by the kernel's autotuning", notUDP) {
		t.integer("receive_buffer", &l.ReceiveBuffer)
	}
}
