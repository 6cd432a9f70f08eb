package fakedns

import (
	"context"
	"fmt"
	"net"
)

// start serves a new Resolver on one free port of 127.0.0.1, UDP and TCP
// alike, as the tests query it.
func start(ctx context.Context, cfg Config) (*Resolver, error) {
	r, err := New(cfg)
	if err != nil {
		return nil, err
	}
	var lastErr error
	for range 20 {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		l, err := net.Listen("tcp", pc.LocalAddr().String())
		if err != nil {
			pc.Close()
			lastErr = err
			continue
		}
		return r, r.Serve(ctx, pc, l)
	}
	return nil, fmt.Errorf("no port free for both UDP and TCP: %w", lastErr)
}
