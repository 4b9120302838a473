package config

import "testing"

// receive_buffer: bytes on a UDP listener, 0 (the default) leaving the
// socket's size alone.
func TestReceiveBufferIsAUDPListenersSize(t *testing.T) {
	for src, want := range map[string]int{
		validUDP:                                0,
		withUDPListener("receive_buffer = 0\n"): 0,
		withUDPListener("receive_buffer = 4194304\n"):    4194304,
		withUDPListener("receive_buffer = 1073741824\n"): MaxReceiveBuffer,
	} {
		if got := mustParse(t, src).Listeners[0].ReceiveBuffer; got != want {
			t.Errorf("receive_buffer %d, want %d, from:\n%s", got, want, src)
		}
	}
}

func TestReceiveBufferProblems(t *testing.T) {
	tcp := func(keys string) string {
		return withListener("name = \"web\"\nbind = \"127.0.0.1:8080\"\nprotocol = \"tcp\"\npool = \"web\"\n" + keys)
	}
	for _, tt := range []problem{
		{"negative", withUDPListener("receive_buffer = -1 #!\n"), "listener[0].receive_buffer", "-1 is out of range: must be between 0 and 1073741824"},
		{"absurd", withUDPListener("receive_buffer = 1073741825 #!\n"), "listener[0].receive_buffer", "1073741825 is out of range: must be between 0 and 1073741824"},
		{"a string", withUDPListener("receive_buffer = \"4MiB\" #!\n"), "listener[0].receive_buffer", `must be an integer, not the string "4MiB"`},
		{"on a tcp listener", tcp("receive_buffer = 65536 #!\n"), "listener[0].receive_buffer",
			`only for protocol = "udp" listeners, and this listener is tcp: a TCP listener's buffers are per connection, sized by the kernel's autotuning`},
		{"on a listener without protocol", withListener("name = \"web\"\nbind = \"127.0.0.1:8080\"\npool = \"web\"\nreceive_buffer = 65536 #!\n"), "listener[0].receive_buffer",
			`(protocol left out means "tcp"): a TCP listener's buffers`},
	} {
		t.Run(tt.name, func(t *testing.T) { wantOneError(t, tt, parseErrors(t, tt.src)) })
	}
}
