//! What a command needs from its surroundings: the root, the output format, the clock, the
//! store's location, the agents' settings.

use super::output::Format;
use crate::query::error::CliResult;
use crate::store::Store;
use crate::thread::ThreadId;
use std::path::PathBuf;

/// What a command needs from its surroundings.
pub(crate) struct Env {
    /// The storage root.
    pub root: PathBuf,
    /// Output format.
    pub format: Format,
    /// Milliseconds since the epoch, read once.
    pub now_ms: u64,
    /// `--format` when given on the command line.
    pub explicit_format: Option<Format>,
    /// Whether stderr is a terminal (progress bars).
    pub stderr_tty: bool,
    /// The working directory.
    pub cwd: PathBuf,
    /// Where the TypeScript tool may have kept the root's nodes besides `<root>/cas`:
    /// `$UNCAGED_CAS_DIR`, and `~/.uncaged/json-cas` when the root was found its way (not
    /// through `UWF_HOME`). Read by the automatic import of a file-layout root.
    pub ts_cas: Vec<PathBuf>,
    /// A fixed clock (`UWF_TEST_NOW_MS`, for tests): every reading of the time gives it.
    pub(super) fixed_now: Option<u64>,
    /// A fixed random seed (`UWF_TEST_SEED`, for tests) and how many ids it has made.
    pub(super) seed: Option<(u64, std::cell::Cell<u64>)>,
    /// `<root>/.env`, once read.
    pub(super) dotenv_file: std::cell::OnceCell<Vec<(String, String)>>,
    /// `<root>/config.yaml`, once read and parsed.
    pub(super) config: std::cell::OnceCell<crate::thread::Config>,
    /// Imports a root that holds only the TypeScript tool's file layout into a new store file
    /// (`None` when there is nothing to import).
    pub(super) auto_import: fn(&Env) -> CliResult<Option<Store>>,
    /// Where the store is when not `<root>/uwf.redb`: `--store`, `UWF_STORE` or `store:` in
    /// config.yaml; a PostgreSQL URL or a redb file path.
    pub store: Option<String>,
}

/// Milliseconds since the epoch from the system clock.
pub(super) fn system_now_ms() -> u64 {
    crate::proc::now_ms()
}

impl Env {
    /// The time now, ms since the epoch (the fixed clock in tests).
    pub(crate) fn clock(&self) -> u64 {
        self.fixed_now.unwrap_or_else(system_now_ms)
    }

    /// The clock as a value other threads can read: the fixed time in tests, else the
    /// system clock.
    pub(crate) fn shared_clock(&self) -> std::sync::Arc<dyn Fn() -> u64 + Send + Sync> {
        match self.fixed_now {
            Some(t) => std::sync::Arc::new(move || t),
            None => std::sync::Arc::new(system_now_ms),
        }
    }

    /// A new thread id for the time of the command: random bits from the system, or from the
    /// fixed seed in tests (each id of a process from the next number).
    pub(crate) fn new_thread_id(&self) -> ThreadId {
        ThreadId::new(self.now_ms, self.random_bits())
    }

    /// `n` new thread ids for the time of the command that sort in the order they are made:
    /// the random bits of the first, counted up.
    pub(crate) fn new_thread_ids(&self, n: usize) -> Vec<ThreadId> {
        let mut first = [0u8; 16];
        first[6..].copy_from_slice(&self.random_bits());
        // The top random bit clear leaves room to count.
        first[6] &= 0x7F;
        let first = u128::from_be_bytes(first);
        (0..n as u128)
            .map(|i| {
                let mut r = [0u8; 10];
                r.copy_from_slice(&(first + i).to_be_bytes()[6..]);
                ThreadId::new(self.now_ms, r)
            })
            .collect()
    }

    /// 80 random bits: from the system, or from the fixed seed in tests (each draw of a process
    /// from the next number).
    fn random_bits(&self) -> [u8; 10] {
        match &self.seed {
            None => crate::thread::random_bytes(),
            Some((seed, n)) => {
                let i = n.get();
                n.set(i + 1);
                let a = twox_hash::XxHash64::oneshot(*seed, &i.to_le_bytes()).to_be_bytes();
                let b = twox_hash::XxHash64::oneshot(!*seed, &i.to_le_bytes()).to_be_bytes();
                let mut r = [0u8; 10];
                r[..8].copy_from_slice(&a);
                r[8..].copy_from_slice(&b[..2]);
                r
            }
        }
    }

    /// The variables of `<root>/.env` that the environment does not set (the environment
    /// wins, as dotenv loads them).
    pub fn dotenv(&self) -> Vec<(String, String)> {
        self.dotenv_file()
            .iter()
            .filter(|(k, _)| std::env::var_os(k).is_none())
            .cloned()
            .collect()
    }

    /// `<root>/config.yaml` (empty when absent), read and parsed once per process for the
    /// commands that only read it; an error is not kept, and the next call reads the file
    /// again. Commands that write the file, and long-lived servers, read it themselves.
    ///
    /// # Errors
    /// As [`crate::thread::Config::load`].
    pub(crate) fn config(&self) -> Result<&crate::thread::Config, crate::thread::ThreadError> {
        if let Some(c) = self.config.get() {
            return Ok(c);
        }
        let c = crate::thread::Config::load(&self.root)?;
        Ok(self.config.get_or_init(|| c))
    }

    /// Every variable of `<root>/.env`, read once per process.
    pub(super) fn dotenv_file(&self) -> &[(String, String)] {
        self.dotenv_file.get_or_init(|| {
            std::fs::read_to_string(self.root.join(".env"))
                .map(|t| crate::thread::config::parse_dotenv(&t))
                .unwrap_or_default()
        })
    }

    /// What agents run with, from one read of `.env`: the models of `config` (keys looked up
    /// in the environment, then in `.env`) and the variables added to an agent's environment
    /// (`.env`, and `UWF_NO_LLM=1` with `no_llm`, which also turns model extraction off).
    pub(crate) fn agent_setup(
        &self,
        config: &crate::thread::Config,
        no_llm: bool,
    ) -> (crate::builtin::Models, Vec<(String, String)>) {
        let mut vars = self.dotenv();
        let models = self.models(config, no_llm, &vars);
        if no_llm {
            vars.push(("UWF_NO_LLM".into(), "1".into()));
        }
        // The store this process was pointed at (`--store`, `UWF_STORE`, `store:`), so that an
        // agent's `uwf agent submit` writes where the step reads, whatever its working
        // directory (a file as an absolute path).
        if self.store.is_some() {
            let s = match self.server_url() {
                Some(url) => url.to_string(),
                None => self.db_path().display().to_string(),
            };
            vars.push(("UWF_STORE".into(), s));
        }
        (models, vars)
    }

    /// The models of `config`, their keys looked up in the environment, then in `dotenv`.
    /// `no_llm` turns model extraction off.
    fn models(
        &self,
        config: &crate::thread::Config,
        no_llm: bool,
        dotenv: &[(String, String)],
    ) -> crate::builtin::Models {
        let dotenv: std::collections::HashMap<String, String> = dotenv.iter().cloned().collect();
        let vars: crate::builtin::Vars = std::sync::Arc::new(move |k: &str| {
            std::env::var(k)
                .ok()
                .or_else(|| dotenv.get(k).cloned())
                .filter(|v| !v.is_empty())
        });
        let mut m = crate::builtin::Models::new(config.clone(), vars, self.shared_clock());
        if no_llm {
            m.llm_extract = false;
        }
        m
    }

    /// The store file: `<root>/uwf.redb`, or the file `--store` (`UWF_STORE`, `store:`)
    /// names; with a server URL, the path where the file would be (it is never created).
    pub(crate) fn db_path(&self) -> PathBuf {
        match &self.store {
            Some(s) if !Store::is_server_url(s) => self.cwd.join(s),
            _ => self.root.join(crate::store::DB_FILE),
        }
    }

    /// The PostgreSQL URL the store is on, if any.
    pub(crate) fn server_url(&self) -> Option<&str> {
        self.store.as_deref().filter(|s| Store::is_server_url(s))
    }

    /// Opens the store for writing, creating it on first use. A root that has only the
    /// TypeScript tool's file layout is imported first into a new redb file (never into a
    /// server: `uwf import` does that).
    ///
    /// # Errors
    /// A store that cannot be opened.
    pub(crate) fn open_rw(&self) -> CliResult<Store> {
        if let Some(url) = self.server_url() {
            return Ok(Store::open_url(url, &|k| std::env::var(k).ok())?);
        }
        if self.store.is_none()
            && let Some(s) = (self.auto_import)(self)?
        {
            return Ok(s);
        }
        Ok(Store::open(&self.db_path())?)
    }

    /// Opens the store for reading; creates it when it does not exist yet.
    ///
    /// # Errors
    /// A store that cannot be opened.
    pub(crate) fn open_ro(&self) -> CliResult<Store> {
        if self.server_url().is_some() {
            return self.open_rw();
        }
        let p = self.db_path();
        if p.exists() {
            Ok(Store::open_read_only(&p)?)
        } else {
            self.open_rw()
        }
    }
}
