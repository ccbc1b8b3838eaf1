package domain

// MarshalSpecReflect is MarshalSpec through protojson only, which the
// fuzz test holds the hand encodings to.
var MarshalSpecReflect = marshalSpecReflect

// VerifyFastJSON makes MarshalSpec check its encoding without protojson
// against protojson's, panicking on a difference, until the returned
// function is called.
func VerifyFastJSON() (stop func()) {
	verifyFastJSON = true
	return func() { verifyFastJSON = false }
}
