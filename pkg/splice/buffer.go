package splice

import "sync"

// bufferSize is the chunk of the copy path: large enough that copying
// costs about as many syscalls per byte as splicing through a small pipe.
const bufferSize = 64 << 10

var buffers = sync.Pool{New: func() any {
	b := make([]byte, bufferSize)
	return &b
}}

func getBuffer() *[]byte  { return buffers.Get().(*[]byte) }
func putBuffer(b *[]byte) { buffers.Put(b) }
