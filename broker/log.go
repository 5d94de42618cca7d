package broker

import (
	"fmt"
	"log/slog"
)

// serverLog maps nats-server's logger (Noticef, Warnf, ...) onto slog.
// Fatalf is logged as an error and its message offered on fatal (capacity
// one, never blocking): the server reports a listener it cannot open that
// way, and Start turns it into an error instead of waiting out its deadline.
// The logger never exits the process.
type serverLog struct {
	l     *slog.Logger
	fatal chan string
}

func (s serverLog) Noticef(format string, v ...any) { s.l.Info(fmt.Sprintf(format, v...)) }
func (s serverLog) Warnf(format string, v ...any)   { s.l.Warn(fmt.Sprintf(format, v...)) }
func (s serverLog) Errorf(format string, v ...any)  { s.l.Error(fmt.Sprintf(format, v...)) }
func (s serverLog) Debugf(format string, v ...any)  { s.l.Debug(fmt.Sprintf(format, v...)) }
func (s serverLog) Tracef(format string, v ...any)  { s.l.Debug(fmt.Sprintf(format, v...)) }

func (s serverLog) Fatalf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	s.l.Error(msg)
	select {
	case s.fatal <- msg:
	default:
	}
}
