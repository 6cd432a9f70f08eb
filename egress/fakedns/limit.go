package fakedns

import (
	"fmt"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/cordon-sandbox/cordon/audit"
	"github.com/cordon-sandbox/cordon/policy"
)

// denyWindow is the least time between two lines for identical denials.
const denyWindow = time.Second

// limiter holds back identical deny lines within denyWindow and counts
// them, so a client retrying a refused name in a loop fills no disk.
type limiter struct {
	mu        sync.Mutex
	pending   map[string]*pendingDeny
	lastSweep time.Time
}

// pendingDeny is the state of one kind of denial (name, type, class and
// reason) since its last line.
type pendingDeny struct {
	// at is when the last line was written.
	at time.Time
	// held counts the denials since then, last is the newest of them.
	held int
	last audit.Record
}

// deny logs a denial of q, unless an identical one was logged within
// denyWindow: then it is counted in the next line.
func (r *Resolver) deny(client string, q dns.Question, d policy.Decision) {
	now := r.now()
	rec := r.record(client, q, d)
	rec.Time = now.UTC()
	key := fmt.Sprintf("%s %d %d %s", d.Reason, q.Qtype, q.Qclass, d.Host)
	l := &r.denies
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.pending[key]
	if p != nil && now.Sub(p.at) < denyWindow {
		p.held++
		p.last = rec
		return
	}
	if p != nil {
		rec.Detail += heldNote(p.held)
	}
	l.pending[key] = &pendingDeny{at: now}
	r.write(rec)
	if now.Sub(l.lastSweep) >= denyWindow {
		r.sweep(now)
		l.lastSweep = now
	}
}

// sweep forgets the denials older than denyWindow, writing a line for
// each that still holds some back. The caller holds r.denies.mu.
func (r *Resolver) sweep(now time.Time) {
	for k, p := range r.denies.pending {
		if now.Sub(p.at) >= denyWindow {
			r.flushOne(p)
			delete(r.denies.pending, k)
		}
	}
}

// flushDenies writes a line for every denial still held back.
func (r *Resolver) flushDenies() {
	r.denies.mu.Lock()
	defer r.denies.mu.Unlock()
	for k, p := range r.denies.pending {
		r.flushOne(p)
		delete(r.denies.pending, k)
	}
}

// flushOne writes the newest held-back denial, counting the others.
func (r *Resolver) flushOne(p *pendingDeny) {
	if p.held == 0 {
		return
	}
	rec := p.last
	rec.Detail += heldNote(p.held - 1)
	r.write(rec)
}

func heldNote(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d identical queries since the previous line were not logged separately)", n)
}
