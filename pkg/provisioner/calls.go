package provisioner

import (
	"context"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/types"
)

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

// createVolume is every CreateVolume made for a claim (provisioning, and a
// clean-up's repeat): its answer is noted in createAnswers.
func (p *Provisioner) createVolume(ctx context.Context, uid types.UID, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	resp, err := p.o.Driver.CreateVolume(ctx, req)
	p.answers.answered(uid, err, p.now())
	return resp, err
}

// noVolumeMade reports whether a CreateVolume's error says that the call
// made no volume and that none of the name exists: a final code (Classify,
// as EP tells final from in-background), but AlreadyExists (a volume of the
// name exists, made with another request) and ResourceExhausted (a full
// backend may be full of a volume of the name that an earlier call is
// still making).
func noVolumeMade(err error) bool {
	if err == nil {
		return false
	}
	switch status.Code(err) {
	case codes.AlreadyExists, codes.ResourceExhausted:
		return false
	}
	return Classify(err, false) == Final
}
