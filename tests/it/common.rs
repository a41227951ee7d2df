//! Shared test helpers: a temporary storage root and the real `uwf` binary run in it with a
//! cleared environment.

#![allow(dead_code)]

use assert_cmd::Command;
use std::path::{Path, PathBuf};

/// A temporary storage root.
pub struct TestEnv {
    pub dir: tempfile::TempDir,
}

/// Output of one run of the binary.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl TestEnv {
    pub fn new() -> TestEnv {
        TestEnv {
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    pub fn db(&self) -> PathBuf {
        self.root().join("uwf.redb")
    }

    /// The binary with `UWF_HOME` set and nothing else from the environment but `PATH`.
    pub fn cmd(&self) -> Command {
        let mut c = Command::cargo_bin("uwf").expect("uwf binary");
        c.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("UWF_HOME", self.root())
            .env("HOME", self.root());
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
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        c
    }

    pub fn run(&self, args: &[&str]) -> Run {
        self.run_stdin(args, "")
    }

    pub fn run_stdin(&self, args: &[&str], stdin: &str) -> Run {
        let out = self
            .cmd()
            .args(args)
            .write_stdin(stdin.to_string())
            .output()
            .expect("run uwf");
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Runs and expects success; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let r = self.run(args);
        assert_eq!(r.code, 0, "uwf {args:?} failed: {}", r.stderr);
        r.stdout
    }

    /// Runs and expects failure with a one-line error containing `needle`.
    pub fn fails(&self, args: &[&str], needle: &str) -> Run {
        let r = self.run(args);
        assert_ne!(r.code, 0, "uwf {args:?} should fail, printed {}", r.stdout);
        assert_eq!(
            r.stderr.trim_end().lines().count(),
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
