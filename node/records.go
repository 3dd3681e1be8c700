package node

// The in-memory record cache. Every record in it is clean: apply writes a
// record to the vote store (fsynced) before it puts it here, under the
// shard lock, and load reads through to the store on a miss. So any cached
// record may be dropped at any time its shard lock is held, and nothing in
// flight is lost: a transition holds the lock from load to save. A resource
// the store does not have is never cached, so requests about names that
// were never used leave nothing behind.

// keepRecord caches rec, evicting another record of the shard if the shard
// is full. The caller holds sh.mu.
func (n *Node) keepRecord(sh *shard, rec Record) {
	if _, ok := sh.recs[rec.Resource]; !ok && len(sh.recs) >= max(n.recordCap, 1) {
		for k := range sh.recs { // map order is random: a random victim
			delete(sh.recs, k)
			break
		}
	}
	sh.recs[rec.Resource] = rec
}

// cachedRecord is the record of resource if the node has it in memory. It
// never reads the store: it serves shortcuts that are only worth taking
// for a record in use.
func (n *Node) cachedRecord(resource string) (Record, bool) {
	sh := n.shard(resource)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	rec, ok := sh.recs[resource]
	return rec, ok
}

// cachedRecords is the number of records in memory.
func (n *Node) cachedRecords() int {
	total := 0
	for i := range n.shards {
		sh := &n.shards[i]
		sh.mu.Lock()
		total += len(sh.recs)
		sh.mu.Unlock()
	}
	return total
}
