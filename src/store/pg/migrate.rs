//! uwf's schema on the server: opening a store creates or migrates it (`migrations/pg/*.sql`,
//! in order, under an advisory lock) and writes the bootstrap schemas on first use.

use super::write::PgWriter;
use super::*;

impl Pg {
    /// Connects to the server of `url`, creating or migrating the schema when needed.
    ///
    /// # Errors
    /// [`StoreError::Server`] naming the server for a bad URL, a refused connection or a
    /// failed login; [`StoreError::TooNew`] for a newer schema.
    pub(crate) fn open(url: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Pg> {
        let pg = Pg::connect(url, env)?;
        pg.migrate()?;
        Ok(pg)
    }

    /// Connects to the server of `url` when its database holds a uwf store of a schema this
    /// binary knows; `None` when it holds none (nothing is created).
    ///
    /// # Errors
    /// As [`Pg::open`].
    pub(crate) fn open_existing(
        url: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<Pg>> {
        let pg = Pg::connect(url, env)?;
        match pg.schema_version()? {
            None => Ok(None),
            Some(v) if v > SCHEMA_VERSION => Err(pg.too_new(v)),
            Some(v) if v < SCHEMA_VERSION => {
                pg.migrate()?;
                Ok(Some(pg))
            }
            Some(_) => Ok(Some(pg)),
        }
    }

    fn migrate(&self) -> Result<()> {
        let mut c = self.conn()?;
        let found = schema_version_fast(&mut c.client).map_err(|e| self.err(&e))?;
        if found == Some(SCHEMA_VERSION) {
            return Ok(());
        }
        if let Some(v) = found
            && v > SCHEMA_VERSION
        {
            return Err(self.too_new(v));
        }
        // The schema, its version and the bootstrap schemas in one transaction, under a lock
        // that makes concurrent first uses wait for the first.
        let mut w = PgWriter::begin(self, &mut c)?;
        w.s()?
            .execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
            .map_err(|e| self.err(&e))?;
        // Another process may have migrated while this one waited for the lock.
        let from = schema_version(&mut w.s()?.client)
            .map_err(|e| self.err(&e))?
            .unwrap_or(0);
        if from > SCHEMA_VERSION {
            return Err(self.too_new(from));
        }
        if from == SCHEMA_VERSION {
            return w.commit();
        }
        for (_, sql) in &MIGRATIONS[from as usize..] {
            w.s()?.client.batch_execute(sql).map_err(|e| self.err(&e))?;
        }
        w.s()?
            .client
            .execute(
                "INSERT INTO uwf_meta (key, value) VALUES ('schema_version', $1)
                 ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                &[&i(SCHEMA_VERSION)],
            )
            .map_err(|e| self.err(&e))?;
        if from == 0 {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64);
            let nodes = crate::store::node::bootstrap_nodes();
            w.put(&nodes.iter().map(|p| (p, now)).collect::<Vec<_>>())?;
        }
        w.commit()
    }

    fn too_new(&self, found: u64) -> StoreError {
        StoreError::TooNew {
            path: self.server.clone().into(),
            found,
            supported: SCHEMA_VERSION,
        }
    }

    /// The schema version of the server's database (`None` before the first use).
    pub(crate) fn schema_version(&self) -> Result<Option<u64>> {
        let mut c = self.conn()?;
        schema_version(&mut c.client).map_err(|e| self.err(&e))
    }
}

/// The schema version, in one round trip when the schema exists (every command asks first);
/// `None` when it does not. Only outside a transaction: a missing table is an error.
pub(super) fn schema_version_fast(
    c: &mut Client,
) -> std::result::Result<Option<u64>, postgres::Error> {
    match c.query_typed(
        "SELECT value FROM uwf_meta WHERE key = 'schema_version'",
        &[],
    ) {
        Ok(r) => Ok(r.first().map(|r| u(r.get(0)))),
        Err(e) if e.code() == Some(&postgres::error::SqlState::UNDEFINED_TABLE) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The schema version recorded in the database, if any. The catalog is read by a query (not
/// `to_regclass`, whose cache may not have seen a table another session just created).
pub(super) fn schema_version(c: &mut Client) -> std::result::Result<Option<u64>, postgres::Error> {
    let has: bool = c
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_tables
                            WHERE schemaname = current_schema() AND tablename = 'uwf_meta')",
            &[],
        )?
        .get(0);
    if !has {
        return Ok(None);
    }
    let r = c.query_opt(
        "SELECT value FROM uwf_meta WHERE key = 'schema_version'",
        &[],
    )?;
    Ok(r.map(|r| u(r.get(0))))
}
