package domain

// MarshalSpecReflect is MarshalSpec through protojson only, which the
// fuzz test holds the hand encodings to.
var MarshalSpecReflect = marshalSpecReflect
