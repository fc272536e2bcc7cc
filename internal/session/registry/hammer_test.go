package registry

import "sync"

// hammer runs f(g, i) for rounds i in each of goroutines g at once and
// waits for them all: the concurrency tests' load.
func hammer(goroutines, rounds int, f func(g, i int)) {
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				f(g, i)
			}
		}()
	}
	wg.Wait()
}
