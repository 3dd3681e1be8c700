// Package mint lets the verifier's own test-support packages (barriertest)
// and tests make a verifier.Admission without a token, to drive barrier
// stores at any resource and epoch. Go's internal rule keeps it out of
// reach of every package outside verifier/, so outside the verifier only
// verification produces an Admission.
package mint

// Admission returns a verifier.Admission (as any, since this package
// cannot import verifier) for resource at epoch. Package verifier sets it
// when it is initialised, before any importer of verifier runs.
var Admission func(resource string, epoch uint64) any
