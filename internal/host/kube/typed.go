package kube

import (
	"context"
	"fmt"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
)

// The few resources conch reads and writes, as typed objects over the
// dynamic client. client-go's typed clientset (k8s.io/client-go/kubernetes)
// links a client and a scheme registration for every API group of
// Kubernetes (half of its packages, and 3.5 ms of every start of the conch
// binary in package inits) to reach these four.
var (
	podGVR           = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	eventGVR         = schema.GroupVersionResource{Version: "v1", Resource: "events"}
	networkPolicyGVR = networkingv1.SchemeGroupVersion.WithResource("networkpolicies")
	tokenReviewGVR   = authv1.SchemeGroupVersion.WithResource("tokenreviews")
)

func (c *cluster) pods(ns string) typed[corev1.Pod] {
	return typed[corev1.Pod]{c.dyn.Resource(podGVR).Namespace(ns), corev1.SchemeGroupVersion.WithKind("Pod")}
}

func (c *cluster) events(ns string) typed[corev1.Event] {
	return typed[corev1.Event]{c.dyn.Resource(eventGVR).Namespace(ns), corev1.SchemeGroupVersion.WithKind("Event")}
}

func (c *cluster) networkPolicies(ns string) typed[networkingv1.NetworkPolicy] {
	return typed[networkingv1.NetworkPolicy]{c.dyn.Resource(networkPolicyGVR).Namespace(ns), networkingv1.SchemeGroupVersion.WithKind("NetworkPolicy")}
}

func (c *cluster) tokenReviews() typed[authv1.TokenReview] {
	return typed[authv1.TokenReview]{c.dyn.Resource(tokenReviewGVR), authv1.SchemeGroupVersion.WithKind("TokenReview")}
}

// typed is one resource of kind gvk, its objects converted to and from
// T (a k8s.io/api struct) at the edge.
type typed[T any] struct {
	ri  dynamic.ResourceInterface
	gvk schema.GroupVersionKind
}

func (t typed[T]) Get(ctx context.Context, name string, opts metav1.GetOptions) (*T, error) {
	return fromUnstructured[T](t.ri.Get(ctx, name, opts))
}

func (t typed[T]) Create(ctx context.Context, obj *T, opts metav1.CreateOptions) (*T, error) {
	u, err := t.toUnstructured(obj)
	if err != nil {
		return nil, err
	}
	return fromUnstructured[T](t.ri.Create(ctx, u, opts))
}

func (t typed[T]) Update(ctx context.Context, obj *T, opts metav1.UpdateOptions) (*T, error) {
	u, err := t.toUnstructured(obj)
	if err != nil {
		return nil, err
	}
	return fromUnstructured[T](t.ri.Update(ctx, u, opts))
}

func (t typed[T]) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions) (*T, error) {
	return fromUnstructured[T](t.ri.Patch(ctx, name, pt, data, opts))
}

func (t typed[T]) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return t.ri.Delete(ctx, name, opts)
}

func (t typed[T]) List(ctx context.Context, opts metav1.ListOptions) ([]T, error) {
	l, err := t.ri.List(ctx, opts)
	if err != nil {
		return nil, err
	}
	out := make([]T, 0, len(l.Items))
	for i := range l.Items {
		v, err := fromUnstructured[T](&l.Items[i], nil)
		if err != nil {
			return nil, err
		}
		out = append(out, *v)
	}
	return out, nil
}

// Watch is the resource's watch with each object of kind gvk converted
// to a *T; an object of another kind (the Status of an error event) is
// passed as it came.
func (t typed[T]) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	w, err := t.ri.Watch(ctx, opts)
	if err != nil {
		return nil, err
	}
	return watch.Filter(w, func(ev watch.Event) (watch.Event, bool) {
		if u, ok := ev.Object.(*unstructured.Unstructured); ok && u.GroupVersionKind() == t.gvk {
			if v, err := fromUnstructured[T](u, nil); err == nil {
				if o, ok := any(v).(runtime.Object); ok {
					ev.Object = o
				}
			}
		}
		return ev, true
	}), nil
}

func (t typed[T]) toUnstructured(obj *T) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", t.gvk.Kind, err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(t.gvk)
	return u, nil
}

func fromUnstructured[T any](u *unstructured.Unstructured, err error) (*T, error) {
	if err != nil {
		return nil, err
	}
	v := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), v); err != nil {
		return nil, fmt.Errorf("decode %s: %w", u.GetKind(), err)
	}
	return v, nil
}
