package engine

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/conchsh/conch/internal/config"
)

// The probe starts with the engine exactly when a configuration sends
// some agent's runs to the gateway host.
func TestGatewayLikely(t *testing.T) {
	cases := []struct {
		config string
		want   bool
	}{
		{`{}`, true},
		{`{"tools":{"exec":{"host":"gateway"}}}`, true},
		{`{"tools":{"exec":{"host":"node"}}}`, false},
		{`{"tools":{"exec":{"host":"node"}},"agents":{"ops":{"tools":{"exec":{"host":"gateway"}}}}}`, true},
		{`{"sandbox":{"mode":"all"}}`, false},
		{`{"sandbox":{"mode":"all"},"tools":{"exec":{"host":"sandbox"}}}`, false},
		{`{"sandbox":{"mode":"non-main"}}`, true}, // main runs on the gateway
		{`{"sandbox":{"mode":"all"},"agents":{"ops":{"sandbox":{"mode":"off"}}}}`, true},
	}
	for _, c := range cases {
		path := filepath.Join(t.TempDir(), "config.json")
		if err := os.WriteFile(path, []byte(c.config), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Load(path)
		if err != nil {
			t.Fatalf("%s: %v", c.config, err)
		}
		if got := gatewayLikely(cfg); got != c.want {
			t.Errorf("%s: gatewayLikely = %v, want %v", c.config, got, c.want)
		}
	}
}
