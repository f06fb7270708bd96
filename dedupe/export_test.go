package dedupe

// CacheBytes is the replay cache's size, which the tests hold to
// ReplayCacheBytes.
func (d *Deduper) CacheBytes() int64 { return d.bytes.Load() }
