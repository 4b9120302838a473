package breaker

// ChooseForceTry is rule 6 (all down). Given the States of the candidate
// backends in the picker's order, it returns the index of the one backend a
// client may force-try: not disabled, least cooldown left. A backend whose
// breaker is closed (only health-down) counts as zero left; ties go to the
// earliest candidate so hash affinity holds. ok is false when every
// candidate is disabled (or there are none).
func ChooseForceTry(candidates []State) (index int, ok bool) {
	index = -1
	var best State
	for i, c := range candidates {
		if c.Disabled {
			continue
		}
		left := c.CooldownLeft
		if !c.Open {
			left = 0
		}
		if index < 0 || left < best.CooldownLeft {
			index, best = i, State{CooldownLeft: left}
		}
	}
	return index, index >= 0
}
