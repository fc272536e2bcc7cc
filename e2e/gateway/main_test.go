package gateway

import (
	"testing"

	"github.com/conchsh/conch/internal/testkit/e2etest"
)

func TestMain(m *testing.M) { e2etest.Main(m) }
