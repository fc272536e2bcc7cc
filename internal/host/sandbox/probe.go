package sandbox

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// ProbeDirect dials from the calling thread only (no resolver or
// transport goroutines, which could run in another namespace): kind port
// takes "host:port", kind http a URL.
func ProbeDirect(kind, arg string) bool {
	switch kind {
	case "port":
		c, err := dialHere(arg)
		if err != nil {
			return false
		}
		c.Close()
		return true
	case "http":
		u, err := url.Parse(arg)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
			return false
		}
		port := u.Port()
		if port == "" {
			port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
		}
		c, err := dialHere(net.JoinHostPort(u.Hostname(), port))
		if err != nil {
			return false
		}
		defer c.Close()
		// One deadline for the whole probe, handshake included: a peer
		// that accepts and never answers must not hold the wait.
		c.SetDeadline(time.Now().Add(2 * time.Second))
		if u.Scheme == "https" {
			tc := tls.Client(c, &tls.Config{ServerName: u.Hostname()})
			if tc.Handshake() != nil {
				return false
			}
			c = tc
		}
		p := u.RequestURI()
		fmt.Fprintf(c, "GET %s HTTP/1.0\r\nHost: %s\r\nUser-Agent: conch-wait\r\n\r\n", p, u.Host)
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			return false
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			return false
		}
		code, _ := strconv.Atoi(f[1])
		return code >= 200 && code < 400
	}
	return false
}

func dialHere(hostport string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return nil, err
	}
	if host == "localhost" || host == "" {
		host = "127.0.0.1"
	}
	if net.ParseIP(host) == nil {
		return nil, fmt.Errorf("probe inside a sandbox needs an IP address or localhost, not %q", host)
	}
	return net.DialTimeout("tcp", net.JoinHostPort(host, port), time.Second)
}
