package graph

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ParseDuration reads an Attractor duration: an integer followed by one of
// ms, s, m, h, d ("250ms", "15m", "1d"). A plain integer is seconds.
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	units := []struct {
		suffix string
		unit   time.Duration
	}{{"ms", time.Millisecond}, {"s", time.Second}, {"m", time.Minute}, {"h", time.Hour}, {"d", 24 * time.Hour}}
	for _, u := range units {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			n, err := strconv.ParseInt(num, 10, 64)
			if err != nil || n < 0 || num == "" || num[0] == '+' {
				return 0, fmt.Errorf("bad duration %q: want an integer followed by ms, s, m, h or d", s)
			}
			if n > int64(1<<62)/int64(u.unit) {
				return 0, fmt.Errorf("bad duration %q: too large", s)
			}
			return time.Duration(n) * u.unit, nil
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || s[0] == '+' {
		return 0, fmt.Errorf("bad duration %q: want an integer followed by ms, s, m, h or d", s)
	}
	if n > int64(1<<62)/int64(time.Second) {
		return 0, fmt.Errorf("bad duration %q: too large", s)
	}
	return time.Duration(n) * time.Second, nil
}
