package main

import (
	_ "github.com/creack/pty"
	_ "github.com/modelcontextprotocol/go-sdk/mcp"
	_ "golang.org/x/sys/unix"
	_ "mvdan.cc/sh/v3/syntax"
)

func main() {}
