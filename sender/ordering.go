package sender

import "fmt"

// ParseOrdering reads a destination's ordering and on_dead settings, as
// the Caddyfile and JSON spell them: ordering "none" (or empty) or
// "entity"; on_dead "skip" (or empty) or "hold", which only ordering
// entity accepts.
func ParseOrdering(ordering, onDead string) (Ordering, error) {
	var o Ordering
	switch ordering {
	case "", "none":
	case "entity":
		o.ByEntity = true
	default:
		return Ordering{}, fmt.Errorf("ordering %q: want none or entity", ordering)
	}
	switch onDead {
	case "", "skip":
	case "hold":
		if !o.ByEntity {
			return Ordering{}, fmt.Errorf("on_dead hold needs ordering entity: an unordered destination has no entity to hold")
		}
		o.Hold = true
	default:
		return Ordering{}, fmt.Errorf("on_dead %q: want skip or hold", onDead)
	}
	return o, nil
}

// Words spells o as ParseOrdering reads it: ordering and on_dead (empty
// when unordered).
func (o Ordering) Words() (ordering, onDead string) {
	switch {
	case !o.ByEntity:
		return "none", ""
	case o.Hold:
		return "entity", "hold"
	}
	return "entity", "skip"
}
