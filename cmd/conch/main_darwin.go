package main

// osEntries are the internal entry points that exist on this OS only:
// none on macOS (its sandbox backends need no init of conch's inside).
var osEntries = map[string]func([]string) int{}
