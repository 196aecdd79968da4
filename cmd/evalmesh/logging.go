package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
)

// The daemon's log: log/slog, text (key=value lines, for a terminal or journald) or JSON
// (one object a line, for log shippers), chosen with --log-format. Lines the node writes as
// "component: message" get a component attribute.

// newLogger returns a logger writing format ("text" or "json") to w.
func newLogger(w io.Writer, format string) (*slog.Logger, error) {
	switch format {
	case "", "text":
		return slog.New(slog.NewTextHandler(w, nil)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, nil)), nil
	}
	return nil, fmt.Errorf("--log-format %q: use text or json", format)
}

// logLine logs one line of the node's printf-style log at INFO.
func logLine(l *slog.Logger, line string) { logLineAt(l, slog.LevelInfo, line) }

// logLineAt logs one line at level (the node's Warnf lines: WARN).
func logLineAt(l *slog.Logger, level slog.Level, line string) {
	line = strings.TrimRight(line, "\n")
	if line == "" {
		return
	}
	if comp, msg, ok := strings.Cut(line, ": "); ok && comp != "" && !strings.ContainsAny(comp, " \t/") {
		// A line written to the daemon's io.Writer as "component: WARN message" is at WARN.
		if rest, warn := strings.CutPrefix(msg, "WARN "); warn {
			level, msg = slog.LevelWarn, rest
		}
		l.Log(context.Background(), level, msg, "component", comp)
		return
	}
	if rest, warn := strings.CutPrefix(line, "WARN "); warn {
		level, line = slog.LevelWarn, rest
	}
	l.Log(context.Background(), level, line)
}

// logWriter turns what is written to it into log records, one per line (for the parts of
// the daemon that write to an io.Writer).
type logWriter struct {
	mu  sync.Mutex
	l   *slog.Logger
	buf bytes.Buffer
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	for {
		line, err := w.buf.ReadString('\n')
		if err != nil { // no newline yet: keep the partial line
			w.buf.Reset()
			w.buf.WriteString(line)
			return len(p), nil
		}
		logLine(w.l, line)
	}
}
