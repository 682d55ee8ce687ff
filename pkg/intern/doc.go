// Package intern shares, between the objects a controller caches, the
// values that many of them hold alike: the capacity and request lists,
// access modes, labels, annotations, finalizers, node affinities, CSI
// attributes and the short strings (namespace, class, driver). At 100,000
// claims of one size in one class every claim then points at the same few
// maps instead of carrying its own: a ResourceList of one entry is about
// 600 bytes, a claim's whole share of a controller's memory a few KiB.
//
// Sharing is safe because nothing changes a cached object in place (the
// informers' rule, which tether keeps: it writes from deep copies). It
// changes no object's content: a shared object is written back as it was.
//
// The files:
//   - intern.go: Interner, safe for concurrent use, with one table per
//     kind of value, each keyed by the value's content and started again
//     empty once it holds Limit values (so values that never repeat cost a
//     bounded table). Str, StrPtr, ModePtr, Resources, AccessModes,
//     StringMap, Strings and Affinity share one value each; Meta, Claim
//     and Volume share an object's common fields in place; Transform is
//     the informer transform that does so for claims and PVs and drops
//     every object's managed fields.
package intern
