package istiovalidate

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"istio.io/istio/pkg/config/analysis/analyzers"
	"istio.io/istio/pkg/config/analysis/diag"
	"istio.io/istio/pkg/config/analysis/local"
	"istio.io/istio/pkg/config/resource"
)

// AnalyzeOptions are what Analyze needs besides the objects.
type AnalyzeOptions struct {
	// MeshConfig is the mesh config (the mesh key of istiod's ConfigMap),
	// in YAML; Istio's defaults fill in what it leaves out.
	MeshConfig string
	// IstioNamespace is istiod's namespace; istio-system when empty.
	IstioNamespace string
}

// Analyze runs all of Istio's analyzers (analyzers.AllCombined, what
// `istioctl analyze` runs) offline over objects, the Istio config, and
// cluster, the Kubernetes objects of the cluster it is meant for
// (Namespaces, Services, Pods...), which istioctl would read from the
// cluster. It returns every message, in Istio's order.
func Analyze(objects, cluster []Object, opts AnalyzeOptions) ([]Finding, error) {
	Quiet()
	istioNS := opts.IstioNamespace
	if istioNS == "" {
		istioNS = "istio-system"
	}
	sa := local.NewSourceAnalyzer(analyzers.AllCombined(), "", resource.Namespace(istioNS), nil)
	if opts.MeshConfig != "" {
		dir, err := os.MkdirTemp("", "istiovalidate-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		path := filepath.Join(dir, "mesh.yaml")
		if err := os.WriteFile(path, []byte(opts.MeshConfig), 0o600); err != nil {
			return nil, err
		}
		if err := sa.AddFileKubeMeshConfig(path); err != nil {
			return nil, fmt.Errorf("mesh config: %w", err)
		}
	}
	// The test source, unlike the one istioctl uses for files, keeps
	// Pods, Services and Namespaces: here they stand for the live cluster.
	if err := sa.AddTestReaderKubeSource([]local.ReaderSource{
		{Name: "istio-config.yaml", Reader: stream(objects)},
		{Name: "cluster.yaml", Reader: stream(cluster)},
	}); err != nil {
		return nil, fmt.Errorf("read the objects: %w", err)
	}
	cancel := make(chan struct{})
	defer close(cancel)
	res, err := sa.Analyze(cancel)
	if err != nil {
		return nil, fmt.Errorf("analyze: %w", err)
	}
	out := make([]Finding, 0, len(res.Messages))
	for _, m := range res.Messages {
		out = append(out, finding(m))
	}
	return out, nil
}

func finding(m diag.Message) Finding {
	f := Finding{
		Level:   Level(m.Type.Level().String()),
		Rule:    "analyzer " + m.Type.Code(),
		Message: fmt.Sprintf(m.Type.Template(), m.Parameters...),
	}
	if r := m.Resource; r != nil {
		f.Object = Ref{
			Namespace: r.Metadata.FullName.Namespace.String(),
			Name:      r.Metadata.FullName.Name.String(),
			Cluster:   r.Metadata.Labels[ClusterLabel],
		}
		if s := r.Metadata.Schema; s != nil {
			f.Object.APIVersion, f.Object.Kind = s.GroupVersionKind().GroupVersion(), s.Kind()
		}
	}
	return f
}

// stream joins objects into one YAML stream.
func stream(objs []Object) *bytes.Buffer {
	var b bytes.Buffer
	for _, o := range objs {
		b.WriteString("---\n")
		b.Write(o.JSON)
		b.WriteString("\n")
	}
	return &b
}
