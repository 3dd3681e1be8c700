package protocol

import (
	"errors"
	"fmt"
)

// EraBits is the width of an epoch era. A cluster's epochs live in eras of
// 2^EraBits: a cluster file's epoch_floor starts the current one, and
// every resharing moves the floor to the start of the next (see
// docs/design-notes.md, "Resharing and epochs"). A node votes only
// strictly inside its era: above the floor and below the next era's
// floor, its ceiling. So tokens of two groups that share one group key
// (the group before a resharing, left running, and the group after it)
// never share an epoch, which is what keeps S1 across a resharing.
const EraBits = 48

// ErrLastEra reports a resharing from the last era: no era lies above it,
// so the floor cannot move up without wrapping around.
var ErrLastEra = errors.New("protocol: no epoch era above this one")

// NextEpochFloor is the one definition of the next era's floor: the epoch
// floor after a resharing of a cluster whose floor is floor, and the
// ceiling of the era floor starts. It fails instead of wrapping at the
// top of the uint64 range.
func NextEpochFloor(floor uint64) (uint64, error) {
	era := floor >> EraBits
	if era == 1<<(64-EraBits)-1 {
		return 0, fmt.Errorf("%w: floor %d is in the last era", ErrLastEra, floor)
	}
	return (era + 1) << EraBits, nil
}

// Era is the epoch range of one group: above Floor, below the next era's
// floor.
type Era struct {
	// Floor is the cluster file's epoch_floor.
	Floor uint64
}

// Beyond reports whether epoch is at or above the next era's floor: a
// node of this era must neither vote there nor learn anything from it.
// The last era has no ceiling.
func (e Era) Beyond(epoch uint64) bool {
	next, err := NextEpochFloor(e.Floor)
	return err == nil && epoch >= next
}

// Ceiling is the next era's floor, and false for the last era.
func (e Era) Ceiling() (uint64, bool) {
	next, err := NextEpochFloor(e.Floor)
	return next, err == nil
}
