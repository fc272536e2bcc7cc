package registry

import (
	"fmt"
	"slices"
	"testing"
)

type rec struct{ id, agent string }

// TestTable: put, get, remove only the current value, select, count,
// remove in one step, and sorted ids (nil when empty).
func TestTable(t *testing.T) {
	tb := NewTable[*rec]()
	if tb.IDs() != nil {
		t.Fatal("empty table has ids")
	}
	a, b, c := &rec{"a", "x"}, &rec{"b", "y"}, &rec{"c", "x"}
	for _, r := range []*rec{c, a, b} {
		tb.Put(r.id, r)
	}
	if got, ok := tb.Get("a"); !ok || got != a || !tb.Has("b") || tb.Has("z") {
		t.Fatal("get")
	}
	if ids := tb.IDs(); !slices.Equal(ids, []string{"a", "b", "c"}) {
		t.Fatalf("ids %v", ids)
	}
	if n := tb.Count(func(r *rec) bool { return r.agent == "x" }); n != 2 {
		t.Fatalf("count %d", n)
	}
	// A newer value under the same id is not removed by the old one's
	// owner.
	a2 := &rec{"a", "x"}
	tb.Put("a", a2)
	if tb.Remove("a", a) || !tb.Has("a") {
		t.Fatal("removed the newer value")
	}
	if !tb.Remove("a", a2) || tb.Has("a") {
		t.Fatal("did not remove the current value")
	}
	gone := tb.RemoveWhere(func(r *rec) bool { return r.agent == "x" })
	if len(gone) != 1 || gone[0] != c || tb.Has("c") || len(tb.Select(nil)) != 1 {
		t.Fatalf("RemoveWhere: %v", gone)
	}
}

// TestTableConcurrent: concurrent puts, gets, selects and removals (run
// with -race) leave exactly what was not removed.
func TestTableConcurrent(t *testing.T) {
	tb := NewTable[*rec]()
	hammer(8, 100, func(g, i int) {
		r := &rec{fmt.Sprintf("%d-%d", g, i), "x"}
		tb.Put(r.id, r)
		tb.Select(func(r *rec) bool { return r.agent == "x" })
		if i%2 == 0 && !tb.Remove(r.id, r) {
			t.Errorf("remove %s", r.id)
		}
	})
	if n := len(tb.IDs()); n != 400 {
		t.Fatalf("%d left, want 400", n)
	}
}
