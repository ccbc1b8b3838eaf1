package kube_test

import (
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshplane/meshplane/libs/kube/kubetest"
	"github.com/meshplane/meshplane/services/translation/internal/adapters/kube"
	"github.com/meshplane/meshplane/services/translation/internal/adapters/lastgoodtest"
	"github.com/meshplane/meshplane/services/translation/internal/app"
	"github.com/meshplane/meshplane/services/translation/internal/domain"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The contract, against a real API server: each store gets a namespace of
// its own.
func TestLastGoodContract(t *testing.T) {
	c := kubetest.Start(t, kubetest.Options{Name: "mgmt"})
	var n atomic.Int32
	lastgoodtest.Run(t, func(t *testing.T) app.LastGoodStore {
		ns := fmt.Sprintf("records-%d", n.Add(1))
		if _, err := c.Clientset().CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		return kube.NewLastGood(c.Dynamic(), ns, "meshplane", slog.New(slog.NewTextHandler(t.Output(), nil)))
	})

	t.Run("only the install's readable records count", func(t *testing.T) {
		ctx := t.Context()
		ns := "shared"
		if _, err := c.Clientset().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		log := slog.New(slog.NewTextHandler(t.Output(), nil))
		ours, theirs := kube.NewLastGood(c.Dynamic(), ns, "meshplane", log), kube.NewLastGood(c.Dynamic(), ns, "other", log)
		vs := lastgoodtest.Versions()
		if err := theirs.Put(ctx, vs[0]); err != nil {
			t.Fatal(err)
		}
		for _, v := range vs[1:] {
			if err := ours.Put(ctx, v); err != nil {
				t.Fatal(err)
			}
		}
		// A record a user broke (its kind is unknown) is left out; the
		// others are read.
		name := kube.RecordName(vs[2].Kind, vs[2].Key)
		u, err := c.Dynamic().Resource(kube.ResourceRecords).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		u.Object["spec"].(map[string]any)["kind"] = "NoSuchKind"
		if _, err := c.Dynamic().Resource(kube.ResourceRecords).Namespace(ns).Update(ctx, u, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		lastgoodtest.Expect(t, ours, []domain.KeptVersion{vs[1], vs[3]})
		lastgoodtest.Expect(t, theirs, vs[:1])
	})

	t.Run("a record without a first-seen time counts from its creation", func(t *testing.T) {
		// Records written before they held first-seen times have a last
		// valid version only: the plane had seen the resource by the time
		// it wrote the record.
		ctx := t.Context()
		ns := "legacy"
		if _, err := c.Clientset().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		s := kube.NewLastGood(c.Dynamic(), ns, "meshplane", slog.New(slog.NewTextHandler(t.Output(), nil)))
		v := lastgoodtest.Versions()[0]
		v.FirstSeen = time.Time{}
		if err := s.Put(ctx, v); err != nil {
			t.Fatal(err)
		}
		u, err := c.Dynamic().Resource(kube.ResourceRecords).Namespace(ns).Get(ctx, kube.RecordName(v.Kind, v.Key), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := u.Object["spec"].(map[string]any)["firstSeen"]; ok {
			t.Fatalf("a version without a first-seen time was written with one: %v", u.Object["spec"])
		}
		got, err := s.Load(ctx)
		if err != nil || len(got) != 1 {
			t.Fatalf("Load = %v, %v", got, err)
		}
		if want := u.GetCreationTimestamp().Time; !got[0].FirstSeen.Equal(want) || want.IsZero() {
			t.Fatalf("first seen %v, want the record's creation %v", got[0].FirstSeen, want)
		}
	})
}
