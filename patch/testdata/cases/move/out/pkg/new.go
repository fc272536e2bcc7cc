package new

func F() {}
