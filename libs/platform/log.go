package platform

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// LogFormat is the encoding of log records: "json" (the default, for log
// pipelines) or "text" (for people at a terminal).
type LogFormat string

const (
	LogFormatJSON LogFormat = "json"
	LogFormatText LogFormat = "text"
)

// MarshalText implements encoding.TextMarshaler.
func (f LogFormat) MarshalText() ([]byte, error) { return []byte(f), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (f *LogFormat) UnmarshalText(b []byte) error {
	switch v := LogFormat(strings.ToLower(string(b))); v {
	case LogFormatJSON, LogFormatText:
		*f = v
		return nil
	default:
		return fmt.Errorf("unknown log format %q (want json or text)", b)
	}
}

// LogOptions configure the process logger.
type LogOptions struct {
	Level  slog.Level
	Format LogFormat

	flagPrefix string
	envErrs    []error
}

// NewLogOptions returns level info, JSON format.
func NewLogOptions() LogOptions {
	return LogOptions{Level: slog.LevelInfo, Format: LogFormatJSON}
}

// AddFlags binds log-level and log-format (with prefix and environment
// fallback as in ServerOptions.AddFlags).
func (o *LogOptions) AddFlags(fs *flag.FlagSet, prefix string) {
	o.flagPrefix = prefix
	b := envBinder{fs: fs, prefix: prefix, errs: &o.envErrs}
	b.bind("log-level", "log level: debug, info, warn or error",
		func(full, u string) { fs.TextVar(&o.Level, full, o.Level, u) })
	b.bind("log-format", "log format: json or text",
		func(full, u string) { fs.TextVar(&o.Format, full, o.Format, u) })
}

// Validate reports values that did not parse and an unknown format.
func (o *LogOptions) Validate() error {
	errs := append([]error(nil), o.envErrs...)
	switch o.Format {
	case LogFormatJSON, LogFormatText:
	default:
		errs = append(errs, fmt.Errorf("%s: unknown log format %q (want json or text)", flagRef(o.flagPrefix, "log-format"), string(o.Format)))
	}
	return errors.Join(errs...)
}

// NewLogger returns a logger writing to w at the configured level. Any
// format other than text gives JSON, so a zero LogOptions still logs
// machine-readably.
func (o LogOptions) NewLogger(w io.Writer) *slog.Logger {
	ho := &slog.HandlerOptions{Level: o.Level}
	if o.Format == LogFormatText {
		return slog.New(slog.NewTextHandler(w, ho))
	}
	return slog.New(slog.NewJSONHandler(w, ho))
}
