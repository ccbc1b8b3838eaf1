package domain

// WithVerifiedEncoding is opts with every spec and status that
// translation encodes without protojson checked against protojson's
// encoding (encode.Encoder.Verify), panicking on a difference.
func WithVerifiedEncoding(opts Options) Options {
	opts.enc.Verify = true
	return opts
}
