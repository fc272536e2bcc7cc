// Package waitprobe answers the network conditions of process wait
// (until port and until http) on the gateway's own network. It is an
// adapter: the engine sees it only as engine.Probes, given at
// construction, so the engine itself never imports net/http.
package waitprobe

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"time"
)

// Probes is the standard implementation of engine.Probes.
type Probes struct{}

// Port reports whether a TCP connection to host:port succeeds within a
// second.
func (Probes) Port(ctx context.Context, host string, port int) bool {
	d := net.Dialer{Timeout: time.Second}
	c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// HTTP reports whether a GET of url answers with a status below 400
// within two seconds (redirects followed, proxies from the environment).
func (Probes) HTTP(ctx context.Context, url string) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode >= 200 && resp.StatusCode < 400
}
