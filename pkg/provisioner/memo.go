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
// the library, which saves it after Provision returns (retrying a refused
// save for ever: libv8.Saves follows those), and the version of the claim that Provision last wrote
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

// createAnswers is this process's memory, per claim UID, of the
// CreateVolume calls it made under the claim's in-flight record: whether
// every one of them answered that it made no volume (noVolumeMade). It
// knows every such call only when this process itself wrote the record on
// a claim that held none (see recorded), and then, from that write on, it
// sees each call answered. With that, "every call answered final" proves
// that no volume exists for the claim, and a clean-up needs no driver
// call (docs/design.md, the in-flight record, step 5).
//
// It is memory only, never written where a namespace user can write: a
// restart, or a record this process did not write from none, leaves no
// entry, and the clean-up then does what it does without one. An entry
// with one call that may have made a volume stays so until it goes. An
// entry goes when the record goes through this process, when a call makes
// a volume (the volume exists: there is nothing to prove), or after
// answersKept without a call. A provisioner process leads once
// (server.RunElected), so its memory never spans another leader's calls.
// Callers hold the claim's lock (claimlock.Set).
type createAnswers struct{ claimMemo[bool] }

// answersKept is how long an entry is kept after its last call or record
// write: well above --retry-interval-max, so a claim retried with backoff
// keeps its entry.
const answersKept = time.Hour

func newCreateAnswers() createAnswers { return createAnswers{claimMemo[bool]{keep: answersKept}} }

// recorded notes that this process wrote the in-flight record on a claim
// that held none, and saw the write succeed: no call made under an earlier
// record can be running (a record goes only once its volume is tracked or
// proven absent, or when the claim's user strips it, which can leak only
// that claim's own volume, as the threat model says). An entry that exists
// already is kept as it is.
func (a *createAnswers) recorded(uid types.UID, now time.Time) {
	if _, at := a.get(uid); at.IsZero() {
		a.add(uid, true, now)
	}
}

// answered notes a CreateVolume's answer for the claim.
func (a *createAnswers) answered(uid types.UID, err error, now time.Time) {
	if err == nil {
		a.forget(uid) // a volume exists
		return
	}
	clean, at := a.get(uid)
	a.add(uid, !at.IsZero() && clean && noVolumeMade(err), now)
}

// noVolume reports whether every CreateVolume this process made for the
// claim since it wrote the claim's record answered that it made no volume
// (true also when it made none since).
func (a *createAnswers) noVolume(uid types.UID) bool {
	clean, at := a.get(uid)
	return !at.IsZero() && clean
}

// deletedVolumes remembers the PVs (by UID) whose volume Delete deleted,
// until their deletion finalizer is removed. Entries are kept for
// deletedKept at most.
type deletedVolumes struct{ claimMemo[struct{}] }

const deletedKept = 10 * time.Minute

func newDeletedVolumes() deletedVolumes {
	return deletedVolumes{claimMemo[struct{}]{keep: deletedKept}}
}

func (d *deletedVolumes) has(uid types.UID) bool {
	_, at := d.get(uid)
	return uid != "" && !at.IsZero()
}

// owners tracks this instance's pending attempts to own claims.
type owners struct {
	mu       sync.Mutex
	pending  map[string]bool
	attempts map[string]int
}
