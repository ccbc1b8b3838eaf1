package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/meshplane/meshplane/libs/pki"
	"github.com/meshplane/meshplane/services/registration/internal/domain"
)

// ErrInvalidArgument is returned for a bad request from an operator.
var ErrInvalidArgument = errors.New("invalid argument")

// Created is the result of CreateCluster: the record and the one copy of
// the new token.
type Created struct {
	Cluster        domain.Cluster
	Token          string
	TokenExpiresAt time.Time
}

// MaxTokenTTL bounds how long a bootstrap token may live.
const MaxTokenTTL = 30 * 24 * time.Hour

// CreateCluster records a cluster, or reuses its record, and issues it a new
// bootstrap token that replaces any earlier one. A deregistered cluster
// starts again; any other keeps its status.
func (r *Registrar) CreateCluster(ctx context.Context, name string, requireApproval bool, tokenTTL time.Duration) (Created, error) {
	if err := validName(name); err != nil {
		return Created{}, err
	}
	if err := r.notReserved(name); err != nil {
		return Created{}, fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	if tokenTTL == 0 {
		tokenTTL = r.opts.TokenTTL
	}
	if tokenTTL < 0 || tokenTTL > MaxTokenTTL {
		return Created{}, fmt.Errorf("%w: token lifetime %s is not between 0 and %s", ErrInvalidArgument, tokenTTL, MaxTokenTTL)
	}
	now := r.now()
	token, rec, err := domain.NewBootstrapToken(name, now, tokenTTL)
	if err != nil {
		return Created{}, err
	}
	c, err := r.stores.Clusters.UpdateCluster(ctx, name, func(c *domain.Cluster, exists bool) error {
		if !exists {
			*c = domain.NewCluster(name, requireApproval, now)
			return nil
		}
		c.Recreate(requireApproval, now)
		return nil
	})
	if err != nil {
		return Created{}, fmt.Errorf("record cluster: %w", err)
	}
	r.changed(name)
	if err := r.stores.Tokens.PutToken(ctx, rec); err != nil {
		return Created{}, fmt.Errorf("store bootstrap token: %w", err)
	}
	r.log.InfoContext(ctx, "bootstrap token created", "cluster", name, "status", c.Status.String(), "token_expires", rec.ExpiresAt)
	return Created{Cluster: c, Token: token, TokenExpiresAt: rec.ExpiresAt}, nil
}

// ApproveCluster lets a pending cluster register.
func (r *Registrar) ApproveCluster(ctx context.Context, name string) (domain.Cluster, error) {
	if err := validName(name); err != nil {
		return domain.Cluster{}, err
	}
	c, err := r.stores.Clusters.UpdateCluster(ctx, name, func(c *domain.Cluster, exists bool) error {
		if !exists {
			return domain.ErrClusterNotFound
		}
		return c.Approve()
	})
	if err != nil {
		return domain.Cluster{}, r.clusterErr(err)
	}
	r.changed(name)
	r.log.InfoContext(ctx, "cluster approved", "cluster", name)
	return c, nil
}

// DeregisterCluster revokes every unexpired certificate of the cluster and
// its outstanding token, and marks it deregistered. It returns how many
// certificates were revoked.
func (r *Registrar) DeregisterCluster(ctx context.Context, name string) (domain.Cluster, int, error) {
	if err := validName(name); err != nil {
		return domain.Cluster{}, 0, err
	}
	// A record the store lost (Redis restarted empty) is re-seeded from
	// its durable copy first, so that the live cluster's certificates are
	// revoked.
	if _, err := r.lookup(ctx, name); err != nil && !errors.Is(err, ErrNotFound) {
		return domain.Cluster{}, 0, r.clusterErr(err)
	}
	var revoke []domain.IssuedCert
	now := r.now()
	c, err := r.stores.Clusters.UpdateCluster(ctx, name, func(c *domain.Cluster, exists bool) error {
		if !exists {
			return domain.ErrClusterNotFound
		}
		revoke = c.Deregister(now)
		return nil
	})
	if err != nil {
		return domain.Cluster{}, 0, r.clusterErr(err)
	}
	r.changed(name)
	if err := r.stores.Tokens.DeleteToken(ctx, name); err != nil {
		return c, 0, fmt.Errorf("delete bootstrap token: %w", err)
	}
	if err := r.revoke(ctx, revoke); err != nil {
		return c, 0, fmt.Errorf("revoke certificates: %w", err)
	}
	r.log.InfoContext(ctx, "cluster deregistered", "cluster", name, "revoked", len(revoke))
	return c, len(revoke), nil
}

// GetCluster returns one record.
func (r *Registrar) GetCluster(ctx context.Context, name string) (domain.Cluster, error) {
	if err := validName(name); err != nil {
		return domain.Cluster{}, err
	}
	c, err := r.lookup(ctx, name)
	if err != nil {
		return domain.Cluster{}, r.clusterErr(err)
	}
	return c, nil
}

// ListClusters returns every record, ordered by name.
func (r *Registrar) ListClusters(ctx context.Context) ([]domain.Cluster, error) {
	cs, err := r.stores.Clusters.Clusters(ctx)
	if err != nil {
		return nil, fmt.Errorf("list clusters: %w", err)
	}
	return cs, nil
}

func (r *Registrar) clusterErr(err error) error {
	if errors.Is(err, ErrNotFound) {
		return domain.ErrClusterNotFound
	}
	if errors.Is(err, domain.ErrClusterNotFound) || errors.Is(err, domain.ErrDeregistered) {
		return err
	}
	return fmt.Errorf("update cluster: %w", err)
}

// validName refuses a name that is not a DNS label before it reaches a
// store key.
func validName(name string) error {
	if err := pki.ValidateName(name); err != nil {
		return fmt.Errorf("%w: cluster: %w", ErrInvalidArgument, err)
	}
	return nil
}
