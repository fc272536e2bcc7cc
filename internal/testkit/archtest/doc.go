// Package archtest checks the layering of conch's packages: imports only go
// down (adapters -> engine -> core -> leaves), core packages never reach
// the network adapters or the MCP SDK, and every package is documented.
package archtest
