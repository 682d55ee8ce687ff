package provisioner

import (
	"sync"
	"time"

	"github.com/tether-csi/tether/pkg/provisioner/records"
	"k8s.io/apimachinery/pkg/types"
)

// claimMemo is this process's memory of one value per claim UID: a hint,
// never the durable record (that is the claim's finalizer). An entry goes
// when done, or once older than keep (pruned as new ones come).
type claimMemo[T any] struct {
	keep   time.Duration
	mu     sync.Mutex
	by     map[types.UID]memoEntry[T]
	pruned time.Time
}

type memoEntry[T any] struct {
	v  T
	at time.Time
}

func (m *claimMemo[T]) add(uid types.UID, v T, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.by == nil {
		m.by = map[types.UID]memoEntry[T]{}
	}
	if now.Sub(m.pruned) > m.keep {
		for k, e := range m.by {
			if now.Sub(e.at) > m.keep {
				delete(m.by, k)
			}
		}
		m.pruned = now
	}
	m.by[uid] = memoEntry[T]{v: v, at: now}
}

// get returns the value for uid and when it was added (zero: none).
func (m *claimMemo[T]) get(uid types.UID) (T, time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.by[uid]
	return e.v, e.at
}

// forget removes the entry of uid.
func (m *claimMemo[T]) forget(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.by, uid)
}

// handoffs remembers, per claim UID, when Provision last returned a PV to
// the library, which saves it after Provision returns (retrying for up to
// about a minute), and the version of the claim that Provision last wrote
// (its in-flight record). The time is only a hint for the in-flight
// reconciler, which waits for that save before it treats a deleted claim's
// volume as unsaved. The version goes into the saved PV's claimRef (see
// LibraryClient). Entries are kept for records.SaveGrace.
type handoffs struct{ claimMemo[string] }

func newHandoffs() handoffs { return handoffs{claimMemo[string]{keep: records.SaveGrace}} }

// at is when Provision last handed a PV off for the claim (zero: not
// recently).
func (h *handoffs) at(uid types.UID) time.Time {
	_, at := h.get(uid)
	return at
}

// claimVersion is the version of the claim that Provision last handed a
// PV off for, "" for none.
func (h *handoffs) claimVersion(uid types.UID) string {
	v, _ := h.get(uid)
	return v
}

// secretsUsed remembers the provisioner secret each CreateVolume of this
// process was given, by claim UID, so that the clean-up of a claim deleted
// with its namespace (whose secrets go with it, and can never come back)
// can still find and delete its volume. After a restart such a clean-up is
// abandoned (reported) instead. Entries go with the record, or after
// secretsKept (the binder dropped the record).
type secretsUsed struct{ claimMemo[map[string]string] }

const secretsKept = time.Hour

func newSecretsUsed() secretsUsed {
	return secretsUsed{claimMemo[map[string]string]{keep: secretsKept}}
}

// remember keeps the secret a CreateVolume was given, if any.
func (s *secretsUsed) remember(uid types.UID, data map[string]string, now time.Time) {
	if len(data) > 0 {
		s.add(uid, data, now)
	}
}

// known returns the secret remembered for the claim.
func (s *secretsUsed) known(uid types.UID) (map[string]string, bool) {
	data, at := s.get(uid)
	return data, !at.IsZero()
}
