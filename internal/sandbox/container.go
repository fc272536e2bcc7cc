package sandbox

// Container is one conch sandbox container.
type Container struct {
	Name       string `json:"name"`
	Scope      string `json:"scope"`
	Running    bool   `json:"running"`
	CreatedAt  int64  `json:"createdAtMs"`
	ConfigHash string `json:"configHash"`
	Status     string `json:"status"`
}
