// Package kube is the kubernetes sandbox backend (docs/kubernetes.md): an
// agent's sandbox is a pod (or an agent-sandbox Sandbox object when that
// CRD is installed) running `conch node`, which dials back to the gateway
// with a single-use join token bound to the pod; the gateway verifies the
// pod's projected service-account token with the TokenReview API and
// pairs it without an operator. From then on the agent's runs go over
// that node link. The package also deletes idle sandboxes, notices pods
// that disappear (their sessions end lost with the cluster's reason) and
// serves `conch sandbox list|recreate|prune` for this backend.
package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/conchsh/conch/internal/config"
)

func init() {
	// client-go logs through klog; conch's libraries do not log.
	klog.SetLogger(logr.Discard())
}

// cluster is one API server as a kubeconfig (or the in-cluster
// configuration) reaches it.
type cluster struct {
	dyn  dynamic.Interface
	raw  rest.Interface // for discovery
	host string
	ns   string // the default namespace

	mu       sync.Mutex
	crdAt    time.Time
	crd      bool
	crdError error
}

var (
	clmu     sync.Mutex
	clusters = map[string]*cluster{}
)

// inClusterNamespace is where a pod finds its own namespace.
const inClusterNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// clusterFor returns the (cached) client of k's cluster.
func clusterFor(k config.KubeSettings) (*cluster, error) {
	key := k.Kubeconfig + "\x00" + k.Context
	if fi, err := os.Stat(k.Kubeconfig); err == nil {
		key += "\x00" + fi.ModTime().String()
	}
	clmu.Lock()
	defer clmu.Unlock()
	if c, ok := clusters[key]; ok {
		return c, nil
	}
	var rc *rest.Config
	ns := ""
	if k.Kubeconfig == "" {
		var err error
		rc, err = rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("sandbox.kubernetes.kubeconfig is not set and conch does not run in a cluster (%v)", err)
		}
		if b, err := os.ReadFile(inClusterNamespace); err == nil {
			ns = strings.TrimSpace(string(b))
		}
	} else {
		if _, err := os.Stat(k.Kubeconfig); err != nil {
			return nil, fmt.Errorf("sandbox.kubernetes.kubeconfig: %v", err)
		}
		cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
			&clientcmd.ClientConfigLoadingRules{ExplicitPath: k.Kubeconfig},
			&clientcmd.ConfigOverrides{CurrentContext: k.Context})
		var err error
		if rc, err = cc.ClientConfig(); err != nil {
			return nil, fmt.Errorf("kubeconfig %s: %v", k.Kubeconfig, err)
		}
		ns, _, _ = cc.Namespace()
	}
	if ns == "" {
		ns = "default"
	}
	rc = rest.CopyConfig(rc)
	rc.UserAgent = "conch"
	rc.Timeout = 30 * time.Second
	// client-go's default limit (5 requests a second, bursts of 10)
	// queues a gateway's calls behind its own watches and renewals: a
	// claim from the warm pool waited up to 200 ms for its turn.
	rc.QPS, rc.Burst = 50, 100
	rc.WarningHandler = rest.NoWarnings{}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	raw, err := rest.UnversionedRESTClientFor(dynamic.ConfigFor(rc))
	if err != nil {
		return nil, err
	}
	c := &cluster{dyn: dyn, raw: raw, host: rc.Host, ns: ns}
	clusters[key] = c
	return c, nil
}

// namespace is the namespace of k's sandboxes.
func (c *cluster) namespace(k config.KubeSettings) string {
	if k.Namespace != "" {
		return k.Namespace
	}
	return c.ns
}

// hasSandboxCRD reports whether the agent-sandbox Sandbox resource is
// served (discovery, re-checked at most every minute).
func (c *cluster) hasSandboxCRD() (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.crdAt.IsZero() && time.Since(c.crdAt) < time.Minute {
		return c.crd, c.crdError
	}
	c.crd, c.crdError = false, nil
	rl, err := c.resourcesOf(sandboxGV)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		c.crdError = c.explain(err, "discover the Sandbox resource")
	default:
		for _, r := range rl.APIResources {
			if r.Name == "sandboxes" {
				c.crd = true
			}
		}
	}
	c.crdAt = time.Now()
	return c.crd, c.crdError
}

// resourcesOf is the API server's list of the resources of gv (what
// client-go's discovery client asks, without the scheme of every API
// group it links).
func (c *cluster) resourcesOf(gv schema.GroupVersion) (*metav1.APIResourceList, error) {
	ctx, cancel := ctxTimeout(context.Background())
	defer cancel()
	b, err := c.raw.Get().AbsPath("/apis", gv.Group, gv.Version).DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	var rl metav1.APIResourceList
	if err := json.Unmarshal(b, &rl); err != nil {
		return nil, fmt.Errorf("the API server's resource list of %s: %w", gv, err)
	}
	return &rl, nil
}

// explain turns a client error into the reason a sandboxed call shows:
// the cluster's own words, and what they mean for the operator.
func (c *cluster) explain(err error, doing string) error {
	var se apierrors.APIStatus
	switch {
	case apierrors.IsForbidden(err):
		return fmt.Errorf("kubernetes refused to %s (RBAC): %s; grant the gateway's identity the Role in docs/kubernetes.md", doing, statusMessage(err))
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("kubernetes at %s refused the gateway's credentials while trying to %s: %s", c.host, doing, statusMessage(err))
	case errors.As(err, &se):
		return fmt.Errorf("kubernetes could not %s: %s", doing, statusMessage(err))
	}
	var ne net.Error
	var ue *url.Error
	if errors.As(err, &ne) || errors.As(err, &ue) || errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("cannot reach the kubernetes API server at %s to %s: %v", c.host, doing, rootCause(err))
	}
	return fmt.Errorf("kubernetes: %s: %v", doing, err)
}

func statusMessage(err error) string {
	var se apierrors.APIStatus
	if errors.As(err, &se) && se.Status().Message != "" {
		return se.Status().Message
	}
	return err.Error()
}

func rootCause(err error) error {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			return ue.Err
		}
		err = u
	}
}

// ctxTimeout bounds one API call.
func ctxTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, 30*time.Second)
}
