package egress

import (
	"fmt"
	"sync"
	"time"

	"github.com/cordon-sandbox/cordon/audit"
)

// Refusals of clients that have not shown the session's token (refused
// for it, or refused by net/http before it could be read) are logged at
// most unauthBurst at once and unauthRate a second after that, unauthMax
// in a session, and the budget does not count them (audit.WriteApart).
// Any local user can connect to the proxy: charged to the budget, such
// lines let one spend it, after which every connection the session's own
// client made was denied; unbounded, they would fill the disk at a few
// kilobytes a second for as long as the session lasts.
const (
	unauthBurst = 100
	unauthRate  = 10
	// unauthMax is some 3.5 MB of lines, 17 minutes of a flood.
	unauthMax = 10000
)

// unauthLimiter is a token bucket for those lines that counts what it
// holds back.
type unauthLimiter struct {
	mu      sync.Mutex
	tokens  float64
	last    time.Time
	dropped int
	// logged counts the lines let through.
	logged int
}

// allow says whether a line may be written now; with it come how many
// were held back since the last one written, and whether it is the
// session's last (unauthMax).
func (l *unauthLimiter) allow(now time.Time) (ok bool, dropped int, final bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last.IsZero() {
		l.tokens = unauthBurst
	} else {
		l.tokens = min(unauthBurst, l.tokens+now.Sub(l.last).Seconds()*unauthRate)
	}
	l.last = now
	if l.tokens < 1 || l.logged >= unauthMax {
		l.dropped++
		return false, 0, false
	}
	l.tokens--
	l.logged++
	dropped, l.dropped = l.dropped, 0
	return true, dropped, l.logged == unauthMax
}

// recordUnauthenticated writes rec, a refusal of a client that has not
// shown the token, within the bounds; past the rate the line is counted,
// and the count goes out with the next one written.
func (s *Server) recordUnauthenticated(rec audit.Record) {
	ok, dropped, final := s.unauth.allow(time.Now())
	if !ok {
		return
	}
	if dropped > 0 {
		rec.Detail += fmt.Sprintf(" (before this one, %d more refusals of clients without the token, past %d a second, were not logged one by one)", dropped, unauthRate)
	}
	if final {
		rec.Detail += fmt.Sprintf(" (the session's last such line, its %dth: later refusals of clients without the token are not logged)", unauthMax)
	}
	s.reported(s.cfg.Audit.WriteApart(rec))
}
