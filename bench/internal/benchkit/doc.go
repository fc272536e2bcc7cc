// Package benchkit holds what the benchmark programs under bench/cmd
// (conchbench, loadbench, agentbench) share:
//
//   - latency summaries and small arithmetic helpers ([Summarize],
//     [Percentile], [Median], [Ratio], [MBps], [MiB]);
//   - /proc readers that find the conch processes of a home and measure
//     them ([Processes], [Filter], [StatusKB], [USSKB]);
//   - a `conch mcp` on a fresh temporary home driven through the official
//     MCP Go SDK client over stdio ([StartServer], [Server.Call]).
//
// It uses only the standard library and the MCP SDK, and works on Linux
// only (it reads /proc).
package benchkit
