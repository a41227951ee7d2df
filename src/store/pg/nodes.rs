//! Reads of nodes on the server: one query each, or a page of a chain, a walk as one query.

use super::write::CHAIN;
use super::*;
use crate::store::backend::{Visit, WalkReport};

impl Pg {
    pub(crate) fn get(&self, id: NodeId) -> Result<Option<StoredNode>> {
        if let Some(n) = self
            .written
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&id)
        {
            return Ok(Some(n.clone()));
        }
        let mut c = self.conn()?;
        let row = c
            .opt(
                "SELECT type, ts, seq, digest, payload FROM uwf_nodes WHERE id = $1",
                &[&key(id)],
            )
            .map_err(|e| self.err(&e))?;
        let n = row.map(|r| node_of(id, &r)).transpose()?;
        // Schemas are read again and again (every step reads its role's), and garbage
        // collection never removes one: kept like the nodes this process wrote.
        if let Some(n) = &n
            && n.type_id == META
        {
            self.remember(vec![n.clone()]);
        }
        Ok(n)
    }

    /// The stored nodes of `ids`, in one query.
    pub(crate) fn get_many(&self, ids: &[NodeId]) -> Result<Vec<StoredNode>> {
        let keys: Vec<i64> = ids.iter().map(|&id| key(id)).collect();
        let mut c = self.conn()?;
        let rows = c
            .query(
                "SELECT type, ts, seq, digest, payload, id FROM uwf_nodes WHERE id = ANY($1)",
                &[&keys],
            )
            .map_err(|e| self.err(&e))?;
        rows.iter().map(|r| node_of(unkey(r.get(5)), r)).collect()
    }

    /// The node `head`, then, while the node is of type `step`, the node its first reference
    /// names, at most `lim` of them, in one query ([`CHAIN`]): a thread's chain read ahead,
    /// each node with its first reference.
    pub(crate) fn chain(
        &self,
        head: NodeId,
        step: NodeId,
        lim: i32,
    ) -> Result<Vec<(StoredNode, Option<NodeId>)>> {
        let mut c = self.conn()?;
        let rows = c
            .query(CHAIN, &[&key(head), &key(step), &lim])
            .map_err(|e| self.err(&e))?;
        rows.iter()
            .map(|r| {
                let next: Option<i64> = r.get(6);
                Ok((node_of(unkey(r.get(5)), r)?, next.map(unkey)))
            })
            .collect()
    }

    pub(crate) fn type_of(&self, id: NodeId) -> Result<Option<NodeId>> {
        let mut c = self.conn()?;
        let row = c
            .opt("SELECT type FROM uwf_nodes WHERE id = $1", &[&key(id)])
            .map_err(|e| self.err(&e))?;
        Ok(row.map(|r| unkey(r.get(0))))
    }

    pub(crate) fn digests(&self, ids: &[NodeId]) -> Result<Vec<Option<[u8; 32]>>> {
        let keys: Vec<i64> = ids.iter().map(|&id| key(id)).collect();
        let mut c = self.conn()?;
        let rows = c
            .query(
                "SELECT id, digest FROM uwf_nodes WHERE id = ANY($1)",
                &[&keys],
            )
            .map_err(|e| self.err(&e))?;
        let found: HashMap<i64, Option<[u8; 32]>> = rows
            .iter()
            .map(|r| (r.get(0), digest_of(r.get(1))))
            .collect();
        Ok(keys
            .iter()
            .map(|k| found.get(k).copied().flatten())
            .collect())
    }

    pub(crate) fn has(&self, id: NodeId) -> Result<bool> {
        Ok(self.type_of(id)?.is_some())
    }

    pub(crate) fn node_count(&self) -> Result<u64> {
        let mut c = self.conn()?;
        let r = c
            .query("SELECT count(*) FROM uwf_nodes", &[])
            .map_err(|e| self.err(&e))?;
        Ok(u(r[0].get(0)))
    }

    /// Up to 10 ids in `lo..=hi`, in id order.
    pub(crate) fn ids_in(&self, lo: u64, hi: u64) -> Result<Vec<NodeId>> {
        let mut c = self.conn()?;
        let rows = c
            .query(
                "SELECT id FROM uwf_nodes WHERE id BETWEEN $1 AND $2 ORDER BY id LIMIT 10",
                &[&key(NodeId(lo)), &key(NodeId(hi))],
            )
            .map_err(|e| self.err(&e))?;
        Ok(rows.iter().map(|r| unkey(r.get(0))).collect())
    }

    pub(crate) fn refs(&self, id: NodeId) -> Result<Option<Vec<NodeId>>> {
        // Whether the node is stored and its references, in one round trip.
        let mut c = self.conn()?;
        let rows = c
            .query("SELECT refs FROM uwf_nodes WHERE id = $1", &[&key(id)])
            .map_err(|e| self.err(&e))?;
        Ok(rows
            .first()
            .map(|r| r.get::<_, Vec<i64>>(0).into_iter().map(unkey).collect()))
    }

    pub(crate) fn list_by_type(&self, type_id: NodeId) -> Result<Vec<NodeId>> {
        let mut c = self.conn()?;
        let rows = c
            .query(
                "SELECT id FROM uwf_nodes WHERE type = $1 ORDER BY seq",
                &[&key(type_id)],
            )
            .map_err(|e| self.err(&e))?;
        Ok(rows.iter().map(|r| unkey(r.get(0))).collect())
    }

    /// Everything `root` reaches: one recursive query returns the reachable nodes with their
    /// references, and the breadth-first order (references in schema order) is taken here,
    /// as on redb. Missing nodes are reported, never skipped.
    pub(crate) fn walk(&self, root: NodeId, visit: Visit<'_>) -> Result<WalkStats> {
        let mut c = self.conn()?;
        let rows = c
            .query("SELECT id, present, refs FROM uwf_walk($1)", &[&key(root)])
            .map_err(|e| self.err(&e))?;
        drop(c);
        let mut graph: HashMap<i64, (bool, Vec<i64>)> = HashMap::with_capacity(rows.len());
        for r in &rows {
            graph.insert(r.get(0), (r.get(1), r.get(2)));
        }
        drop(rows);
        let mut report = WalkReport::new(visit);
        let mut seen: HashSet<i64> = HashSet::with_capacity(graph.len());
        let mut queue = VecDeque::from([(key(root), None)]);
        seen.insert(key(root));
        while let Some((k, parent)) = queue.pop_front() {
            match graph.get(&k) {
                Some((true, refs)) => {
                    report.found(unkey(k))?;
                    for r in refs {
                        if seen.insert(*r) {
                            queue.push_back((*r, Some(unkey(k))));
                        }
                    }
                }
                _ => report.missing(unkey(k), parent)?,
            }
        }
        report.finish()
    }

    /// Every node in `order` ("id" or "seq"), streamed in pages of 8,192 rows.
    pub(crate) fn for_each_node<E: From<StoreError>>(
        &self,
        by_seq: bool,
        mut f: impl FnMut(StoredNode) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        let mut after = i64::MIN;
        let mut first = true;
        loop {
            let rows = {
                let mut c = self.conn()?;
                let sql = match (by_seq, first) {
                    (true, _) => {
                        "SELECT id, type, ts, seq, digest, payload FROM uwf_nodes
                         WHERE seq > $1 ORDER BY seq LIMIT 8192"
                    }
                    (false, true) => {
                        "SELECT id, type, ts, seq, digest, payload FROM uwf_nodes
                         WHERE id >= $1 ORDER BY id LIMIT 8192"
                    }
                    (false, false) => {
                        "SELECT id, type, ts, seq, digest, payload FROM uwf_nodes
                         WHERE id > $1 ORDER BY id LIMIT 8192"
                    }
                };
                c.query(sql, &[&after]).map_err(|e| self.err(&e))?
            };
            first = false;
            let Some(last) = rows.last() else {
                return Ok(());
            };
            after = if by_seq { last.get(3) } else { last.get(0) };
            for r in &rows {
                let n = StoredNode {
                    id: unkey(r.get(0)),
                    type_id: unkey(r.get(1)),
                    timestamp: u(r.get(2)),
                    seq: u(r.get(3)),
                    digest: digest_of(r.get(4)).ok_or(StoreError::Corrupt(unkey(r.get(0))))?,
                    payload_cbor: r.get(5),
                };
                f(n)?;
            }
        }
    }

    // ---- records ----
}
