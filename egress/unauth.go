package egress

import (
	"fmt"
	"sync"
	"time"

	"github.com/cordon-sandbox/cordon/audit"
)

// Refusals of clients that have not shown the session's token (refused
// for it, or refused by net/http before it could be read) are logged at
// most unauthBurst at once and unauthRate a second after that. Any local
// user can connect to the proxy; unbounded, such lines would let one
// spend the session's audit budget, after which every connection the
// session's own client makes is denied.
const (
	unauthBurst = 100
	unauthRate  = 10
)

// unauthLimiter is a token bucket for those lines that counts what it
// holds back.
type unauthLimiter struct {
	mu      sync.Mutex
	tokens  float64
	last    time.Time
	dropped int
}

// allow says whether a line may be written now; with it comes how many
// were held back since the last one written.
func (l *unauthLimiter) allow(now time.Time) (ok bool, dropped int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last.IsZero() {
		l.tokens = unauthBurst
	} else {
		l.tokens = min(unauthBurst, l.tokens+now.Sub(l.last).Seconds()*unauthRate)
	}
	l.last = now
	if l.tokens < 1 {
		l.dropped++
		return false, 0
	}
	l.tokens--
	dropped, l.dropped = l.dropped, 0
	return true, dropped
}

// recordUnauthenticated writes rec, a refusal of a client that has not
// shown the token, within the bound; past it the line is counted, and the
// count goes out with the next one written.
func (s *Server) recordUnauthenticated(rec audit.Record) {
	ok, dropped := s.unauth.allow(time.Now())
	if !ok {
		return
	}
	if dropped > 0 {
		rec.Detail += fmt.Sprintf(" (before this one, %d more refusals of clients without the token, past %d a second, were not logged one by one)", dropped, unauthRate)
	}
	s.record(rec)
}
