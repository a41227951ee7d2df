//! Shared test helpers: a temporary storage root and the real `uwf` binary run in it with a
//! cleared environment.

#![allow(dead_code)]

use assert_cmd::Command;
use std::path::{Path, PathBuf};

/// The backend the suites run on: `UWF_TEST_BACKEND=postgres` puts every [`TestEnv`]'s store
/// in a fresh database of the test server ([`crate::pg::server`]); anything else, or unset,
/// keeps the redb file in the root.
pub fn on_postgres() -> bool {
    std::env::var("UWF_TEST_BACKEND").is_ok_and(|b| b == "postgres" || b == "postgresql")
}

/// A temporary storage root.
pub struct TestEnv {
    pub dir: tempfile::TempDir,
    /// The store's URL when the suite runs on PostgreSQL ([`on_postgres`]).
    pub store_url: Option<String>,
    /// Runs get a fixed clock and a fixed random seed per run (see [`TestEnv::fixed`]).
    fixed: bool,
    runs: std::cell::Cell<u64>,
}

/// The fixed clock of [`TestEnv::fixed`]: 2026-01-01T00:00:00Z.
pub const FIXED_NOW_MS: u64 = 1_767_225_600_000;

/// Output of one run of the binary.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl From<std::process::Output> for Run {
    fn from(out: std::process::Output) -> Run {
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

impl TestEnv {
    pub fn new() -> TestEnv {
        let store_url = on_postgres().then(|| {
            crate::pg::server()
                .expect("UWF_TEST_BACKEND=postgres needs a PostgreSQL server")
                .fresh_database()
        });
        TestEnv {
            dir: tempfile::tempdir().expect("tempdir"),
            store_url,
            fixed: false,
            runs: std::cell::Cell::new(0),
        }
    }

    /// A root whose runs see the clock at [`FIXED_NOW_MS`] and a random seed that is the
    /// run's number, so ids and times in outputs are the same on every test run.
    pub fn fixed() -> TestEnv {
        TestEnv {
            fixed: true,
            ..TestEnv::new()
        }
    }

    /// A transcript of `uwf <line>` for a snapshot: stdout, then stderr with each line marked
    /// `! `, then `[exit N]` unless 0; the root's path reads `[ROOT]`, the binary's `[UWF]` and
    /// the source tree's `[REPO]`. `line` is split on spaces; a word in single quotes may hold
    /// spaces.
    pub fn transcript(&self, line: &str) -> String {
        let words = split_words(line);
        let args: Vec<&str> = words.iter().map(String::as_str).collect();
        let r = self.run(&args);
        let root = self.root().display().to_string();
        let bin = uwf_bin().display().to_string();
        let repo = env!("CARGO_MANIFEST_DIR");
        let mask = |s: &str| {
            s.replace(&root, "[ROOT]")
                .replace(&bin, "[UWF]")
                .replace(repo, "[REPO]")
        };
        let mut t = mask(&r.stdout);
        for l in mask(&r.stderr).lines() {
            t.push_str("! ");
            t.push_str(l);
            t.push('\n');
        }
        if r.code != 0 {
            t.push_str(&format!("[exit {}]\n", r.code));
        }
        t
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    pub fn db(&self) -> PathBuf {
        self.root().join("uwf.redb")
    }

    /// The store of this root, opened in the test's process: the redb file, or the database
    /// of the server when the suite runs on PostgreSQL.
    pub fn store(&self) -> uwf::store::Store {
        match &self.store_url {
            Some(url) => uwf::store::Store::open_url(url, &|_| None).expect("open the database"),
            None => uwf::store::Store::open(&self.db()).expect("open the store"),
        }
    }

    /// The binary with `UWF_HOME` set and nothing else from the environment but `PATH`.
    pub fn cmd(&self) -> Command {
        let mut c = Command::cargo_bin("uwf").expect("uwf binary");
        c.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("UWF_HOME", self.root())
            .env("HOME", self.root());
        if let Some(url) = &self.store_url {
            c.env("UWF_STORE", url);
        }
        if self.fixed {
            let n = self.runs.get();
            self.runs.set(n + 1);
            c.env("UWF_TEST_NOW_MS", FIXED_NOW_MS.to_string())
                .env("UWF_TEST_SEED", n.to_string());
        }
        c
    }

    /// The same as [`TestEnv::cmd`] as a `std::process::Command`, for processes a test spawns,
    /// waits on or kills itself (output discarded).
    pub fn std_cmd(&self) -> std::process::Command {
        let mut c = std::process::Command::new(assert_cmd::cargo::cargo_bin("uwf"));
        c.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("UWF_HOME", self.root())
            .env("HOME", self.root())
            .envs(self.store_url.iter().map(|u| ("UWF_STORE", u)))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        c
    }

    pub fn run(&self, args: &[&str]) -> Run {
        self.run_stdin(args, "")
    }

    /// `uwf <args>` with the clock at `now_ms`.
    pub fn run_at(&self, now_ms: u64, args: &[&str]) -> Run {
        let out = self
            .cmd()
            .env("UWF_TEST_NOW_MS", now_ms.to_string())
            .args(args)
            .output()
            .expect("run uwf");
        Run::from(out)
    }

    pub fn run_stdin(&self, args: &[&str], stdin: &str) -> Run {
        let out = self
            .cmd()
            .args(args)
            .write_stdin(stdin.to_string())
            .output()
            .expect("run uwf");
        Run::from(out)
    }

    /// Runs and expects success; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let r = self.run(args);
        assert_eq!(r.code, 0, "uwf {args:?} failed: {}", r.stderr);
        r.stdout
    }

    /// Runs and expects failure with a one-line error (plus `hint:` lines) containing `needle`.
    pub fn fails(&self, args: &[&str], needle: &str) -> Run {
        let r = self.run(args);
        assert_ne!(r.code, 0, "uwf {args:?} should fail, printed {}", r.stdout);
        assert_eq!(
            r.stderr
                .trim_end()
                .lines()
                .filter(|l| !l.starts_with("hint: "))
                .count(),
            1,
            "one-line error, got {:?}",
            r.stderr
        );
        assert!(
            r.stderr.contains(needle),
            "stderr {:?} should contain {needle:?}",
            r.stderr
        );
        r
    }
}

/// Splits a command line on spaces; single quotes group words with spaces.
fn split_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut any = false;
    for c in line.chars() {
        match c {
            '\'' => {
                quoted = !quoted;
                any = true;
            }
            ' ' if !quoted => {
                if any {
                    words.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            c => {
                cur.push(c);
                any = true;
            }
        }
    }
    if any {
        words.push(cur);
    }
    words
}

/// A path as a command-line argument.
pub fn p(path: &Path) -> String {
    path.display().to_string()
}

/// Whether `pid` is a running process (a zombie counts as ended).
pub fn running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !matches!(
            stat.rsplit_once(')')
                .and_then(|(_, r)| r.split_whitespace().next()),
            Some("Z" | "X")
        ),
        Err(_) => false,
    }
}

/// Parses one line of JSON output.
pub fn json(s: &str) -> uwf::cas::Value {
    uwf::cas::Value::from_json_str(s.trim()).unwrap_or_else(|e| panic!("not JSON {s:?}: {e}"))
}

/// SHA-like fingerprint of a file's bytes (BLAKE3).
pub fn fingerprint(p: &Path) -> String {
    blake3::hash(&std::fs::read(p).expect("read file"))
        .to_hex()
        .to_string()
}

/// The `uwf` binary under test.
pub fn uwf_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_uwf"))
}

/// A fixture workflow file.
pub fn workflow_fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/workflows")
        .join(name)
}

/// A file under `examples/`.
pub fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(name)
}

impl TestEnv {
    /// Writes an executable shell script `name` into the root; `@UWF@` in `body` is replaced by
    /// the path of the binary under test.
    pub fn agent(&self, name: &str, body: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let p = self.root().join(name);
        let text = format!(
            "#!/bin/sh\n{}\n",
            body.replace("@UWF@", &uwf_bin().display().to_string())
        );
        std::fs::write(&p, text).expect("write agent");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        p
    }

    /// The `--agent` value of the scripted agent with `script`.
    pub fn scripted(&self, script: &Path) -> String {
        format!(
            "{} agent scripted --script {}",
            uwf_bin().display(),
            script.display()
        )
    }

    /// Starts a thread of `workflow` with `--cwd` the root; returns its id.
    pub fn start(&self, workflow: &str, prompt: &str) -> String {
        let cwd = self.root().display().to_string();
        let out = self.ok(&["thread", "start", workflow, "-p", prompt, "--cwd", &cwd]);
        json(&out)
            .get("thread")
            .and_then(|t| t.as_str())
            .expect("thread id")
            .to_string()
    }

    /// `thread show` as JSON.
    pub fn show(&self, thread: &str) -> uwf::cas::Value {
        json(&self.ok(&["thread", "show", thread]))
    }

    /// The head of a thread.
    pub fn head(&self, thread: &str) -> String {
        self.show(thread)
            .get("head")
            .and_then(|h| h.as_str())
            .expect("head")
            .to_string()
    }

    /// The roles of a thread's steps, oldest first.
    pub fn roles(&self, thread: &str) -> Vec<String> {
        let v = json(&self.ok(&["thread", "steps", thread]));
        v.get("steps")
            .and_then(|s| s.as_array())
            .expect("steps")
            .iter()
            .skip(1)
            .map(|s| s.get("role").and_then(|r| r.as_str()).unwrap().to_string())
            .collect()
    }
}

impl TestEnv {
    /// The binary as a `std::process::Command` (to spawn several at once), with the same
    /// environment as [`TestEnv::cmd`].
    pub fn spawn_cmd(&self) -> std::process::Command {
        self.spawn_cmd_of(&uwf_bin())
    }

    /// [`TestEnv::spawn_cmd`] of `program`, a uwf binary elsewhere.
    pub fn spawn_cmd_of(&self, program: &Path) -> std::process::Command {
        let mut c = std::process::Command::new(program);
        c.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("UWF_HOME", self.root())
            .env("HOME", self.root())
            .envs(self.store_url.iter().map(|u| ("UWF_STORE", u)))
            .stdin(std::process::Stdio::null());
        c
    }
}

/// The eight states a thread can be in, as `thread list --status` and the docs name them.
pub const THREAD_STATES: [&str; 8] = [
    "queued",
    "idle",
    "running",
    "paused",
    "completed",
    "failed",
    "cancelled",
    "dropped",
];
