package provisioner

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// handoffs remembers, per claim UID, when Provision last returned a PV to
// the library, which saves it after Provision returns (retrying for up to
// about a minute), and the version of the claim that Provision last wrote
// (its in-flight record). The time is only a hint for the in-flight
// reconciler, which waits for that save before it treats a deleted claim's
// volume as unsaved; the durable record is the claim's finalizer. The
// version goes into the saved PV's claimRef (see LibraryClient). Entries
// older than saveGrace are pruned as new ones come.
type handoffs struct {
	mu     sync.Mutex
	at     map[types.UID]handoff
	pruned time.Time
}

type handoff struct {
	at           time.Time
	claimVersion string
}

func (h *handoffs) add(uid types.UID, now time.Time, claimVersion string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.at == nil {
		h.at = map[types.UID]handoff{}
	}
	if now.Sub(h.pruned) > saveGrace {
		for k, e := range h.at {
			if now.Sub(e.at) > saveGrace {
				delete(h.at, k)
			}
		}
		h.pruned = now
	}
	h.at[uid] = handoff{at: now, claimVersion: claimVersion}
}

func (h *handoffs) get(uid types.UID) time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.at[uid].at
}

// claimVersion is the version of the claim that Provision last handed a
// PV off for, "" for none.
func (h *handoffs) claimVersion(uid types.UID) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.at[uid].claimVersion
}

func (h *handoffs) done(uid types.UID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.at, uid)
}
