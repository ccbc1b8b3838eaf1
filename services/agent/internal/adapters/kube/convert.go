package kube

import (
	"github.com/meshplane/meshplane/services/agent/discovery"
	"github.com/meshplane/meshplane/services/agent/internal/domain"
)

// toPod returns what the pod cache kept of a pod, with its current
// metadata.
func toPod(p *cachedPod) domain.Pod {
	out := p.Pod
	out.Name, out.Namespace, out.Labels = p.Name, p.Namespace, p.Labels
	out.Controller = discovery.ControllerOf(&p.ObjectMeta)
	return out
}
