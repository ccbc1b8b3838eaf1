package httpserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// MaxLoginBody bounds the sign-in body: a Kubernetes token is a few KiB.
const MaxLoginBody = 16 << 10

// ParseLoginBody reads {"token":"..."}: exactly one JSON object with a
// non-empty string token and no other fields.
func ParseLoginBody(r io.Reader) (string, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxLoginBody+1))
	if err != nil {
		return "", fmt.Errorf("read body: %w", err)
	}
	if len(b) > MaxLoginBody {
		return "", fmt.Errorf("body over %d bytes", MaxLoginBody)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var body struct {
		Token *string `json:"token"`
	}
	if err := dec.Decode(&body); err != nil {
		return "", fmt.Errorf("body is not {\"token\": \"...\"}: %w", err)
	}
	if dec.More() {
		return "", errors.New("body has more than one JSON value")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return "", errors.New("body has trailing data")
	}
	if body.Token == nil || *body.Token == "" {
		return "", errors.New("token is missing or empty")
	}
	return *body.Token, nil
}
