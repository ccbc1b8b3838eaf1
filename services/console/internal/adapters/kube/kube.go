// Package kube checks bearer tokens (TokenReview) and authorizes views
// (SubjectAccessReview) in the management cluster with client-go. The
// console's own service account needs create on tokenreviews and
// subjectaccessreviews (system:auth-delegator grants both).
package kube

import (
	"context"
	"fmt"

	"github.com/meshplane/meshplane/services/console/internal/app"
	"github.com/meshplane/meshplane/services/console/internal/domain"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Reviewer asks the management cluster's API server.
type Reviewer struct {
	client kubernetes.Interface
	// audiences, when set, are the audiences a token must be meant for.
	audiences []string
}

// NewReviewer uses client, which must be allowed to create TokenReviews
// and SubjectAccessReviews.
func NewReviewer(client kubernetes.Interface, audiences ...string) *Reviewer {
	return &Reviewer{client: client, audiences: audiences}
}

var (
	_ app.Authenticator = (*Reviewer)(nil)
	_ app.Authorizer    = (*Reviewer)(nil)
)

// Authenticate implements app.Authenticator with a TokenReview.
func (r *Reviewer) Authenticate(ctx context.Context, token string) (domain.User, bool, error) {
	tr, err := r.client.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: r.audiences},
	}, metav1.CreateOptions{})
	if err != nil {
		// The error never carries the token: client-go sends it in the
		// body, and errors name the resource only.
		return domain.User{}, false, fmt.Errorf("create TokenReview: %w", err)
	}
	if !tr.Status.Authenticated || tr.Status.Error != "" {
		return domain.User{}, false, nil
	}
	u := tr.Status.User
	extra := make(map[string][]string, len(u.Extra))
	for k, v := range u.Extra {
		extra[k] = append([]string(nil), v...)
	}
	return domain.User{Username: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra}, true, nil
}

// Allowed implements app.Authorizer with a SubjectAccessReview.
func (r *Reviewer) Allowed(ctx context.Context, u domain.User, a domain.Attributes) (bool, error) {
	extra := make(map[string]authorizationv1.ExtraValue, len(u.Extra))
	for k, v := range u.Extra {
		extra[k] = v
	}
	sar, err := r.client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra,
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: a.Verb, Group: a.Group, Resource: a.Resource, Subresource: a.Subresource, Namespace: a.Namespace, Name: a.Name,
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("create SubjectAccessReview for %s: %w", a, err)
	}
	return sar.Status.Allowed, nil
}
