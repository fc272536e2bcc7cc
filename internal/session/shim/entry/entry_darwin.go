package entry

// osEntries are the entry points that exist on this OS only: none on
// macOS (its sandbox backends need no init of conch's inside).
var osEntries = map[string]func([]string) int{}
