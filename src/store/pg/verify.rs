//! `verify` and `reindex` on the server.

use super::*;

impl Pg {
    /// `verify` on a server: every node re-hashed (id and digest), its payload checked for
    /// canonical CBOR, its type for a stored schema and its stored references against those
    /// its schema finds in the payload; one pass in write order, 8,192 rows a query.
    pub(crate) fn verify(
        &self,
        schemas: &dyn crate::store::backend::Types,
        progress: crate::store::report::Progress<'_>,
    ) -> Result<crate::store::report::VerifyReport> {
        use crate::store::report::{Damage, check_node};
        let pg = self;
        let total = pg.node_count()?;
        let mut report = crate::store::report::VerifyReport::default();
        let mut types: HashMap<NodeId, Option<Arc<crate::store::types::TypeInfo>>> = HashMap::new();
        let mut after = i64::MIN;
        loop {
            let rows = {
                let mut c = pg.conn()?;
                c.query(
                    "SELECT n.id, n.type, n.seq, n.digest, n.payload,
                            n.refs
                     FROM uwf_nodes n WHERE n.seq > $1 ORDER BY n.seq LIMIT 8192",
                    &[&after],
                )
                .map_err(|e| pg.err(&e))?
            };
            let Some(last) = rows.last() else { break };
            after = last.get(2);
            for r in &rows {
                let (id, type_id) = (unkey(r.get(0)), unkey(r.get(1)));
                let digest: &[u8] = r.get(3);
                let payload: &[u8] = r.get(4);
                let edges: Vec<i64> = r.get(5);
                report.nodes += 1;
                let typing = if type_id == id {
                    None
                } else if type_id == META {
                    Some((true, None))
                } else {
                    let info = match types.get(&type_id) {
                        Some(i) => i.clone(),
                        None => {
                            let i = match schemas.type_info(type_id) {
                                Ok(i) => Some(i),
                                Err(StoreError::UnknownType(_)) => None,
                                Err(e) => return Err(e),
                            };
                            if let Some(Err(e)) = i.as_ref().map(|i| i.plan()) {
                                report.push(Damage::BadSchema {
                                    type_id,
                                    message: e.to_string(),
                                });
                            }
                            types.insert(type_id, i.clone());
                            i
                        }
                    };
                    Some((info.is_some(), info))
                };
                let refs: Vec<NodeId> = edges.iter().map(|&k| unkey(k)).collect();
                check_node(&mut report, id, type_id, digest, payload, &refs, typing);
            }
            progress(report.nodes, total);
        }
        progress(report.nodes, total);
        Ok(report)
    }

    /// `reindex` on a server: the references of every node found again in its payload and
    /// written where they differ (the type index is the `uwf_nodes_type` index, which the server keeps). Returns
    /// the number of nodes.
    pub(crate) fn reindex(
        &self,
        schemas: &dyn crate::store::backend::Types,
        progress: crate::store::report::Progress<'_>,
    ) -> Result<u64> {
        let pg = self;
        let total = pg.node_count()?;
        let mut types: HashMap<NodeId, Option<Arc<crate::store::types::TypeInfo>>> = HashMap::new();
        let mut after = i64::MIN;
        let mut n = 0u64;
        loop {
            let rows = {
                let mut c = pg.conn()?;
                c.query(
                    "SELECT n.id, n.type, n.seq, n.payload,
                            n.refs
                     FROM uwf_nodes n WHERE n.seq > $1 ORDER BY n.seq LIMIT 8192",
                    &[&after],
                )
                .map_err(|e| pg.err(&e))?
            };
            let Some(last) = rows.last() else { break };
            after = last.get(2);
            let mut fixes: Vec<(i64, Vec<i64>)> = Vec::new();
            for r in &rows {
                let (id, type_id) = (unkey(r.get(0)), unkey(r.get(1)));
                let payload: &[u8] = r.get(3);
                let edges: Vec<i64> = r.get(4);
                n += 1;
                let refs = if type_id == id || type_id == META {
                    Vec::new()
                } else {
                    let info = match types.get(&type_id) {
                        Some(i) => i.clone(),
                        None => {
                            let i = match schemas.type_info(type_id) {
                                Ok(i) => Some(i),
                                Err(StoreError::UnknownType(_)) => None,
                                Err(e) => return Err(e),
                            };
                            types.insert(type_id, i.clone());
                            i
                        }
                    };
                    match info {
                        Some(i) => crate::store::node::refs_in(&i, id, payload)?,
                        None => Vec::new(),
                    }
                };
                let want: Vec<i64> = refs.iter().map(|&r| key(r)).collect();
                if want != edges {
                    fixes.push((key(id), want));
                }
            }
            if !fixes.is_empty() {
                let mut c = pg.conn()?;
                let mut w = PgWriter::begin(pg, &mut c)?;
                for (id, want) in &fixes {
                    w.s()?
                        .execute("UPDATE uwf_nodes SET refs = $2 WHERE id = $1", &[id, want])
                        .map_err(|e| pg.err(&e))?;
                }
                w.commit()?;
            }
            progress(n, total);
        }
        Ok(n)
    }
}
