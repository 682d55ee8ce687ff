package provisioner

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// handoffs remembers, per claim UID, when Provision last returned a PV to
// the library, which saves it after Provision returns (retrying for up to
// about a minute). It is only a hint for the in-flight reconciler, which
// waits for that save before it treats a deleted claim's volume as
// unsaved; the durable record is the claim's finalizer. Entries older than
// saveGrace are pruned as new ones come.
type handoffs struct {
	mu     sync.Mutex
	at     map[types.UID]time.Time
	pruned time.Time
}

func (h *handoffs) add(uid types.UID, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.at == nil {
		h.at = map[types.UID]time.Time{}
	}
	if now.Sub(h.pruned) > saveGrace {
		for k, t := range h.at {
			if now.Sub(t) > saveGrace {
				delete(h.at, k)
			}
		}
		h.pruned = now
	}
	h.at[uid] = now
}

func (h *handoffs) get(uid types.UID) time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.at[uid]
}

func (h *handoffs) done(uid types.UID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.at, uid)
}
