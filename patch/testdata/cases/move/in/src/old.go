package old

func F() {}
