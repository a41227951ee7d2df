//! The store on a PostgreSQL server, through the real binary: what a wrong URL, a refused
//! connection, a wrong password and a newer schema say; a store copied to a server and back;
//! runners of many machines (each with a root of its own) sharing one database while one of
//! them is SIGKILLed and the server restarts.

use crate::common::{Run, TestEnv, json, p};
use crate::pg;
use std::collections::HashMap;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};
use uwf::cas::bootstrap;
use uwf::cas::{NodeId, Value};

/// A root whose commands go to `url`.
fn env_on(url: &str) -> TestEnv {
    let mut env = TestEnv::new();
    env.store_url = Some(url.to_string());
    env
}

/// Puts the ten-role workflow of [`pg::ten_roles`] in `env`'s store; returns its script's path.
fn put_ten_roles(env: &TestEnv) -> std::path::PathBuf {
    let (wf, script) = pg::ten_roles();
    let wf_path = env.root().join("ten.yaml");
    let script_path = env.root().join("ten.script.yaml");
    std::fs::write(&wf_path, wf).unwrap();
    std::fs::write(&script_path, script).unwrap();
    env.ok(&["workflow", "put", &p(&wf_path)]);
    script_path
}

/// The schema version a database records.
fn schema_version_in(c: &mut postgres::Client) -> i64 {
    c.query_one(
        "SELECT value FROM uwf_meta WHERE key = 'schema_version'",
        &[],
    )
    .unwrap()
    .get(0)
}

/// A port on 127.0.0.1 where nothing listens: bound by a socket that does not listen (a
/// connection is refused), held while the value lives, so no server of another test takes it.
fn closed_port() -> (std::os::fd::OwnedFd, u16) {
    use std::os::fd::FromRawFd;
    #[allow(unsafe_code)]
    // SAFETY: a new socket, bound to a zeroed sockaddr_in filled here, its name read back
    // into one of the same size; the descriptor is owned by the returned value alone.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        let owned = std::os::fd::OwnedFd::from_raw_fd(fd);
        let mut a: libc::sockaddr_in = std::mem::zeroed();
        a.sin_family = libc::AF_INET as libc::sa_family_t;
        a.sin_addr.s_addr = u32::from(std::net::Ipv4Addr::LOCALHOST).to_be();
        let mut len = size_of::<libc::sockaddr_in>() as libc::socklen_t;
        let sa = (&raw mut a).cast::<libc::sockaddr>();
        assert_eq!(
            libc::bind(fd, sa, len),
            0,
            "bind: {}",
            std::io::Error::last_os_error()
        );
        assert_eq!(libc::getsockname(fd, sa, &mut len), 0);
        (owned, u16::from_be(a.sin_port))
    }
}

/// One line on stderr, a non-zero exit, the server named and no password.
fn one_line_naming(r: &Run, server: &str, secret: &str) {
    assert_ne!(r.code, 0, "should fail: {}", r.stdout);
    let lines: Vec<&str> = r.stderr.trim_end().lines().collect();
    assert_eq!(lines.len(), 1, "one line: {:?}", r.stderr);
    assert!(lines[0].contains(server), "{:?} names {server}", lines[0]);
    assert!(
        !r.stderr.contains(secret),
        "the password leaks: {:?}",
        r.stderr
    );
}

#[test]
fn a_refused_connection_is_one_line_naming_the_server_never_the_password() {
    let (_held, port) = closed_port();
    let env = TestEnv::new();
    let url = format!("postgres://bob:hunter2@127.0.0.1:{port}/flows");
    let r = env.run(&["--store", &url, "thread", "list"]);
    one_line_naming(
        &r,
        &format!("postgres://bob@127.0.0.1:{port}/flows"),
        "hunter2",
    );
    assert!(r.stderr.contains("refused"), "{}", r.stderr);
    assert!(!env.db().exists(), "no redb file is created beside a URL");
    // The same through UWF_STORE, and through `store:` in config.yaml.
    let r = env
        .cmd()
        .env("UWF_STORE", &url)
        .args(["cas", "get", "AAAA"])
        .output()
        .unwrap();
    one_line_naming(&Run::from(r), "127.0.0.1", "hunter2");
    std::fs::write(env.root().join("config.yaml"), format!("store: {url}\n")).unwrap();
    let r = env.run(&["workflow", "list"]);
    one_line_naming(&r, &format!("127.0.0.1:{port}"), "hunter2");
    assert!(!env.db().exists());
}

#[test]
fn a_malformed_url_is_one_line() {
    let env = TestEnv::new();
    let r = env.run(&[
        "--store",
        "postgres://bob:hunter2@127.0.0.1:notaport/x",
        "thread",
        "list",
    ]);
    one_line_naming(&r, "postgres://bob@127.0.0.1:notaport/x", "hunter2");
    assert!(r.stderr.contains("not a PostgreSQL URL"), "{}", r.stderr);
}

#[test]
fn a_wrong_password_is_one_line_naming_the_server() {
    let Some(server) = pg::dedicated() else {
        return;
    };
    let mut admin = postgres::Client::connect(&server.admin_url(), postgres::NoTls).unwrap();
    admin
        .batch_execute("CREATE ROLE carol LOGIN PASSWORD 'right-one'")
        .unwrap();
    admin
        .batch_execute("CREATE DATABASE carols OWNER carol")
        .unwrap();
    // Passwords checked on TCP from here on.
    let dir: String = admin.query_one("SHOW data_directory", &[]).unwrap().get(0);
    let hba = Path::new(&dir).join("pg_hba.conf");
    std::fs::write(
        &hba,
        "local all all trust\nhost all postgres 127.0.0.1/32 trust\nhost all all 127.0.0.1/32 scram-sha-256\n",
    )
    .unwrap();
    admin.batch_execute("SELECT pg_reload_conf()").unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let port = server.port();
    let env = TestEnv::new();
    let wrong = format!("postgres://carol:wrong-one@127.0.0.1:{port}/carols");
    let r = env.run(&["--store", &wrong, "thread", "list"]);
    one_line_naming(
        &r,
        &format!("postgres://carol@127.0.0.1:{port}/carols"),
        "wrong-one",
    );
    assert!(
        r.stderr.contains("password authentication failed"),
        "{}",
        r.stderr
    );
    // The right one through PGPASSWORD (libpq's variables fill what the URL leaves out).
    let r = env
        .cmd()
        .env("PGPASSWORD", "right-one")
        .args([
            "--store",
            &format!("postgres://carol@127.0.0.1:{port}/carols"),
            "store",
            "info",
        ])
        .output()
        .unwrap();
    let r = Run::from(r);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let info = json(&r.stdout);
    assert_eq!(info.get("backend"), Some(&Value::str("postgresql")));
    assert!(!r.stdout.contains("right-one"));
}

#[test]
fn a_newer_schema_is_refused_and_left_alone() {
    let Some(server) = pg::server() else { return };
    let url = server.fresh_database();
    let env = env_on(&url);
    env.ok(&["cas", "put-text", "kept"]);
    let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    c.batch_execute("UPDATE uwf_meta SET value = 99 WHERE key = 'schema_version'")
        .unwrap();
    let r = env.run(&["cas", "put-text", "refused"]);
    assert_ne!(r.code, 0);
    assert_eq!(r.stderr.trim_end().lines().count(), 1, "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!("127.0.0.1:{}", server.port())),
        "{}",
        r.stderr
    );
    let want = format!(
        "99, newer than this uwf supports ({})",
        uwf::store::PG_SCHEMA_VERSION
    );
    assert!(r.stderr.contains(&want), "{}", r.stderr);
    let n: i64 = c
        .query_one("SELECT count(*) FROM uwf_nodes", &[])
        .unwrap()
        .get(0);
    let v = schema_version_in(&mut c);
    assert_eq!(v, 99);
    c.batch_execute(&format!(
        "UPDATE uwf_meta SET value = {} WHERE key = 'schema_version'",
        uwf::store::PG_SCHEMA_VERSION
    ))
    .unwrap();
    let after = json(&env.ok(&["store", "info"]));
    assert_eq!(after.get("nodes").and_then(Value::as_f64), Some(n as f64));
}

/// redb → PostgreSQL → redb: the same threads, the same markdown, every node checked, and a
/// copy run again writes nothing.
#[test]
fn a_store_copied_to_a_server_and_back_reads_the_same() {
    let Some(server) = pg::server() else { return };
    let env = TestEnv::new();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let wf = p(&repo.join("examples/debate.yaml"));
    let script = format!(
        "uwf agent scripted --script {}",
        p(&repo.join("examples/debate.script.yaml"))
    );
    let on_file = |e: &TestEnv, args: &[&str]| {
        let out = e.cmd().env_remove("UWF_STORE").args(args).output().unwrap();
        let r = Run::from(out);
        assert_eq!(r.code, 0, "{args:?}: {}", r.stderr);
        r.stdout
    };
    on_file(&env, &["workflow", "put", &wf]);
    let t1 = json(&on_file(&env, &["thread", "start", "debate", "-p", "one"]));
    let t1 = t1.get("thread").unwrap().as_str().unwrap().to_string();
    on_file(
        &env,
        &["thread", "step", &t1, "-c", "10", "--agent", &script],
    );
    let t2 = json(&on_file(&env, &["thread", "start", "debate", "-p", "two"]));
    let t2 = t2.get("thread").unwrap().as_str().unwrap().to_string();
    on_file(&env, &["thread", "step", &t2, "--agent", &script]);

    let url = server.fresh_database();
    let db = p(&env.db());
    let out = json(&on_file(&env, &["store", "copy", &db, &url]));
    assert_eq!(out.get("verified"), out.get("nodes"));
    let again = json(&on_file(&env, &["store", "copy", &db, &url]));
    assert_eq!(again.get("nodesWritten").and_then(Value::as_f64), Some(0.0));
    assert_eq!(
        again.get("historyWritten").and_then(Value::as_f64),
        Some(0.0)
    );
    let back = env.root().join("back.redb");
    on_file(&env, &["store", "copy", &url, &p(&back)]);

    let pg = env_on(&url);
    for args in [
        vec!["thread", "list", "--all"],
        vec!["thread", "read", &t1],
        vec!["thread", "steps", &t2],
        vec!["workflow", "list"],
    ] {
        let a = on_file(&env, &args);
        assert_eq!(pg.ok(&args), a, "{args:?} on the server");
        let mut b = vec!["--store", back.to_str().unwrap()];
        b.extend(&args);
        assert_eq!(on_file(&env, &b), a, "{args:?} after the copy back");
    }
    // The copy on the server goes on where the file left off.
    pg.ok(&["thread", "step", &t2, "--agent", &script]);
    assert_eq!(pg.roles(&t2).len(), 2);
    let v = json(&pg.ok(&["cas", "verify"]));
    assert_eq!(v.get("status"), Some(&Value::str("ok")), "{v:?}");
}

// ---- many machines ----

/// The roles of every finished thread's chain, and how many StepNodes each thread has in the
/// store (on its chain or not).
fn chains(url: &str) -> (HashMap<String, Vec<String>>, HashMap<String, usize>) {
    let store = uwf::store::Store::open_url(url, &|_| None).unwrap();
    let step_type = bootstrap::by_name("uwf/StepNode").unwrap().id;
    let mut roles = HashMap::new();
    store
        .for_each_history::<uwf::store::StoreError>(|h| {
            let mut chain = Vec::new();
            let mut at = Some(h.head.id().unwrap());
            while let Some(id) = at {
                let n = store.get(id).unwrap().unwrap();
                let v = n.payload().unwrap();
                if n.type_id != step_type {
                    break;
                }
                chain.push(v.get("role").unwrap().as_str().unwrap().to_string());
                at = v
                    .get("prev")
                    .and_then(Value::as_str)
                    .and_then(|s| NodeId::parse(s).ok());
            }
            chain.reverse();
            roles.insert(h.thread.clone(), chain);
            Ok(())
        })
        .unwrap();
    // StepNodes by the StartNode they belong to, mapped to threads through the chains' starts.
    let mut by_start: HashMap<String, usize> = HashMap::new();
    for id in store.list_by_type(step_type).unwrap() {
        let v = store.get(id).unwrap().unwrap().payload().unwrap();
        let start = v.get("start").unwrap().as_str().unwrap().to_string();
        *by_start.entry(start).or_default() += 1;
    }
    (roles, by_start)
}

/// What the server's sessions are doing and the leases held, for a failure message.
fn server_state(c: &mut postgres::Client) -> String {
    let mut out = String::new();
    for r in c
        .query(
            "SELECT pid, state, wait_event_type, wait_event, left(query, 80)
             FROM pg_stat_activity WHERE application_name = 'uwf'",
            &[],
        )
        .unwrap()
    {
        let (pid, state, wt, we, q): (
            i32,
            Option<String>,
            Option<String>,
            Option<String>,
            Option<String>,
        ) = (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4));
        out.push_str(&format!("{pid} {state:?} {wt:?}/{we:?} {q:?}\n"));
    }
    for r in c
        .query(
            "SELECT thread, holder, expires_at > now() FROM uwf_leases",
            &[],
        )
        .unwrap()
    {
        let (t, h, live): (String, String, bool) = (r.get(0), r.get(1), r.get(2));
        out.push_str(&format!("lease {t} held by {h} (unexpired: {live})\n"));
    }
    let leases: i64 = c
        .query_one("SELECT count(*) FROM uwf_leases", &[])
        .unwrap()
        .get(0);
    let threads: i64 = c
        .query_one("SELECT count(*) FROM uwf_threads", &[])
        .unwrap()
        .get(0);
    out.push_str(&format!("{threads} active threads, {leases} leases"));
    out
}

fn spawn_runner(home: &Path, url: &str, script: &Path) -> Child {
    std::fs::create_dir_all(home).unwrap();
    std::process::Command::new(assert_cmd::cargo::cargo_bin("uwf"))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("UWF_HOME", home)
        .env("HOME", home)
        .env("UWF_STORE", url)
        .args([
            "run",
            "--until-idle",
            "-j",
            "4",
            "--agent",
            &format!("uwf agent scripted --script {}", p(script)),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Four runners, each with a root of its own (no file shared), on one database: every thread's
/// chain is its ten roles exactly, none lost or doubled, while one runner is SIGKILLed mid-run
/// and the server restarts under the other three. `UWF_TEST_MANY_THREADS` sets the size (40).
#[test]
fn four_runners_on_one_database_lose_and_double_nothing() {
    let Some(server) = pg::dedicated() else {
        return;
    };
    let threads: usize = std::env::var("UWF_TEST_MANY_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40);
    let url = server.fresh_database();
    let env = env_on(&url);
    let script_path = put_ten_roles(&env);
    for i in 0..threads {
        env.ok(&["thread", "start", "ten", "-p", &format!("task {i}"), "-q"]);
    }
    let machines = tempfile::tempdir().unwrap();
    let mut runners: Vec<Child> = (0..4)
        .map(|m| spawn_runner(&machines.path().join(format!("m{m}")), &url, &script_path))
        .collect();
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let done = |admin: &mut postgres::Client| -> i64 {
        admin
            .query_one("SELECT count(*) FROM uwf_history", &[])
            .unwrap()
            .get(0)
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    // Kill one runner once a tenth of the threads are done.
    while done(&mut admin) < (threads / 10).max(1) as i64 {
        assert!(Instant::now() < deadline, "no progress");
        std::thread::sleep(Duration::from_millis(20));
    }
    runners[0].kill().unwrap();
    runners[0].wait().unwrap();
    // Restart the server under the other three.
    drop(admin);
    server.restart();
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let pids: Vec<u32> = runners.iter().map(Child::id).collect();
    for (i, r) in runners.iter_mut().enumerate().skip(1) {
        loop {
            if let Some(st) = r.try_wait().unwrap() {
                let mut err = String::new();
                use std::io::Read;
                r.stderr.take().unwrap().read_to_string(&mut err).unwrap();
                assert!(st.success(), "runner {i} failed: {err}");
                break;
            }
            if Instant::now() >= deadline {
                if std::env::var_os("UWF_TEST_GDB").is_some() {
                    let bt = std::process::Command::new("gdb")
                        .args([
                            "-p",
                            &r.id().to_string(),
                            "-batch",
                            "-ex",
                            "thread apply all bt",
                        ])
                        .output()
                        .unwrap();
                    std::fs::write("/tmp/runner-bt.txt", bt.stdout).unwrap();
                }
                let _ = r.kill();
                let mut err = String::new();
                use std::io::Read;
                r.stderr.take().unwrap().read_to_string(&mut err).unwrap();
                panic!(
                    "runner {i} did not finish (runners {pids:?}): {}\n{err}",
                    server_state(&mut admin)
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    assert_eq!(
        done(&mut admin),
        threads as i64,
        "every thread finished: {}",
        server_state(&mut admin)
    );
    let (roles, by_start) = chains(&url);
    let want: Vec<String> = (0..10).map(|i| format!("r{i}")).collect();
    assert_eq!(roles.len(), threads);
    for (t, chain) in &roles {
        assert_eq!(chain, &want, "thread {t}");
    }
    // Steps cut short by the SIGKILL or the restart (at most the 4 jobs of each of the four
    // runners) may leave a StepNode that no chain references, for gc; none is on a chain.
    assert_eq!(by_start.len(), threads);
    let extra: usize = by_start.values().map(|&n| n - 10).sum();
    assert!(by_start.values().all(|&n| n >= 10), "{by_start:?}");
    assert!(
        extra <= 16,
        "{extra} StepNodes off the chains: {by_start:?}"
    );
    let leases: i64 = admin
        .query_one("SELECT count(*) FROM uwf_leases", &[])
        .unwrap()
        .get(0);
    assert_eq!(leases, 0, "no lease left behind");
}

/// Limits set in the store hold for runners of different roots (no config.yaml anywhere): two
/// runners never have three threads of a workflow limited to two in progress at once.
#[test]
fn limits_in_the_store_hold_across_runners_of_different_roots() {
    let Some(server) = pg::server() else { return };
    let url = server.fresh_database();
    let env = env_on(&url);
    let wf = env.root().join("line.yaml");
    std::fs::write(&wf, crate::runner::LINE).unwrap();
    env.ok(&["workflow", "put", &p(&wf)]);
    let set = json(&env.ok(&[
        "limits",
        "set",
        "line",
        "--concurrency",
        "2",
        "--max-queue",
        "10",
    ]));
    assert_eq!(set.get("concurrency").and_then(Value::as_f64), Some(2.0));
    assert_eq!(set.get("overflow"), Some(&Value::str("queue")));
    let log = env.root().join("agent.log");
    let agent = env.agent(
        "agent.sh",
        &format!(
            "echo \"start $1 $(date +%s%N)\" >> {log}\nsleep 0.15\necho \"end $1 $(date +%s%N)\" >> {log}\nprintf -- '---\\nnote: %s\\n---\\n' \"$2\" | @UWF@ agent submit \"$1\" \"$2\"",
            log = log.display()
        ),
    );
    let mut threads = Vec::new();
    for i in 0..6 {
        let v = json(&env.ok(&["thread", "start", "line", "-p", "go"]));
        let status = v.get("status").and_then(Value::as_str);
        assert_eq!(status, if i < 2 { None } else { Some("queued") }, "{v}");
        threads.push(v.get("thread").unwrap().as_str().unwrap().to_string());
    }
    let machines = tempfile::tempdir().unwrap();
    let runners: Vec<Child> = (0..2)
        .map(|m| {
            let home = machines.path().join(format!("m{m}"));
            std::fs::create_dir_all(&home).unwrap();
            std::process::Command::new(assert_cmd::cargo::cargo_bin("uwf"))
                .env_clear()
                .env("PATH", std::env::var("PATH").unwrap_or_default())
                .env("UWF_HOME", &home)
                .env("HOME", &home)
                .env("UWF_STORE", &url)
                .args(["run", "--until-idle", "-j", "8", "--agent", &p(&agent)])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for r in runners {
        let out = r.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    for t in &threads {
        assert_eq!(env.roles(t), ["a", "b", "c"], "{t}");
    }
    let text = std::fs::read_to_string(&log).unwrap();
    let mut span: HashMap<String, (u128, u128)> = HashMap::new();
    for l in text.lines() {
        let f: Vec<&str> = l.split(' ').collect();
        let ns: u128 = f[2].parse().unwrap();
        let x = span.entry(f[1].to_string()).or_insert((ns, ns));
        x.0 = x.0.min(ns);
        x.1 = x.1.max(ns);
    }
    assert_eq!(span.len(), 6);
    for (t, (s, _)) in &span {
        let at_once = span.values().filter(|(a, b)| a <= s && s < b).count();
        assert!(at_once <= 2, "{t}: {at_once} threads in progress at once");
    }
    let list = json(&env.ok(&["limits", "list"]));
    assert_eq!(list.as_array().map(Vec::len), Some(1));
    let rm = json(&env.ok(&["limits", "rm", "line"]));
    assert_eq!(rm.get("removed"), Some(&Value::Bool(true)));
    assert_eq!(
        json(&env.ok(&["limits", "list"])).as_array().map(Vec::len),
        Some(0)
    );
}

/// A lease held on another machine is live while its expiry, which its holder renews, is ahead
/// (by the server's clock), and taken over once it has passed: a dead machine holds nothing.
#[test]
fn another_machines_lease_lives_until_its_expiry() {
    let Some(server) = pg::server() else { return };
    let url = server.fresh_database();
    let env = env_on(&url);
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let t = env.start(&p(&repo.join("examples/debate.yaml")), "q");
    let script = format!(
        "uwf agent scripted --script {}",
        p(&repo.join("examples/debate.script.yaml"))
    );
    let store = env.store();
    let id = uwf::workflow::ThreadId::parse(&t).unwrap();
    store
        .write(|w| {
            w.set_lease(
                &id,
                &uwf::store::Lease {
                    pid: 4242,
                    since_ms: 1,
                    boot_id: "a-boot-of-another-machine".into(),
                    start_ticks: 7,
                    expires_ms: None,
                },
            )
        })
        .unwrap();
    let lease = || {
        store
            .leases()
            .unwrap()
            .into_iter()
            .find(|(t, _)| *t == id)
            .map(|(_, l)| l)
    };
    let ahead = lease().unwrap().expires_ms.unwrap();
    assert!(ahead > now_ms(), "the expiry is ahead");
    assert!(lease().unwrap().is_live());
    let r = env.run(&["thread", "step", &t, "--agent", &script]);
    assert_eq!(
        r.code, 75,
        "busy while the other machine's lease lives: {}",
        r.stderr
    );
    assert!(r.stderr.contains("pid 4242"), "{}", r.stderr);
    let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    c.batch_execute("UPDATE uwf_leases SET expires_at = now() - interval '1 second'")
        .unwrap();
    assert!(lease().unwrap().expires_ms.unwrap() <= now_ms(), "expired");
    assert!(!lease().unwrap().is_live());
    env.ok(&["thread", "step", &t, "--agent", &script]);
    assert_eq!(env.roles(&t).len(), 1);
    assert!(lease().is_none(), "released after the step");
}

/// The web view never creates a store: on a database without one it says so and leaves the
/// database empty.
#[test]
fn serve_on_a_database_without_a_store_creates_nothing() {
    let Some(server) = pg::server() else { return };
    let url = server.fresh_database();
    let env = TestEnv::new();
    let r = env.run(&["--store", &url, "serve", "--port", "0"]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stderr.contains("no store at postgres://"), "{}", r.stderr);
    let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let tables: i64 = c
        .query_one(
            "SELECT count(*) FROM pg_catalog.pg_tables WHERE schemaname = 'public'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(tables, 0, "serve created tables");
}

/// A batch large enough for COPY, in a transaction that fails later: nothing of it stays, and
/// the next large batch on the same connections goes through.
#[test]
fn a_copied_batch_in_a_failed_transaction_leaves_nothing() {
    let Some(server) = pg::server() else { return };
    let url = server.fresh_database();
    let store = uwf::store::Store::open_url(&url, &|_| None).unwrap();
    let text = uwf::workflow::nodes::TEXT;
    let batch = |tag: &str| -> Vec<uwf::store::Prepared> {
        (0..600)
            .map(|i| {
                store
                    .prepare(text, &Value::str(format!("{tag} {i}")), true)
                    .unwrap()
            })
            .collect()
    };
    let before = store.node_count().unwrap();
    let first = batch("rolled back");
    let r: Result<(), uwf::store::StoreError> = store.write(|w| {
        w.put(&first, 1)?;
        Err(uwf::store::StoreError::Internal("a later failure".into()))
    });
    assert!(r.is_err());
    assert_eq!(store.node_count().unwrap(), before);
    assert!(!store.has(first[0].id).unwrap());
    let second = batch("kept");
    let out = store.put(&second, 2).unwrap();
    assert!(out.iter().all(|o| *o == uwf::store::PutOutcome::Inserted));
    assert_eq!(store.node_count().unwrap(), before + 600);
    // The same nodes again: present, nothing new.
    let again = store.put(&second, 3).unwrap();
    assert!(again.iter().all(|o| *o == uwf::store::PutOutcome::Existed));
}

/// Every event of a walk from `root`, in order.
fn walked(s: &uwf::store::Store, root: NodeId) -> Vec<String> {
    let mut out = Vec::new();
    s.walk(root, |e| out.push(format!("{e:?}"))).unwrap();
    out
}

/// The walk, `verify` and `reindex` on a server agree with redb: the same events in the same
/// order (a node reached twice once, a node not stored reported as missing); references
/// damaged in the database are found by `verify` and mended by `reindex`; a store of schema 2
/// (references as edge rows) migrates with every reference kept.
#[test]
fn walk_verify_and_reindex_on_a_server_agree_with_redb() {
    use crate::store::{id, write_chain};
    use uwf::store::{Damage, Store};
    let Some(server) = pg::server() else { return };
    let url = server.fresh_database();
    let dir = tempfile::tempdir().unwrap();
    let local = Store::open(&dir.path().join("uwf.redb")).unwrap();
    let remote = Store::open_url(&url, &|k| std::env::var(k).ok()).unwrap();
    let a = write_chain(&local, 12, "a");
    assert_eq!(write_chain(&remote, 12, "a"), a);
    // A step whose output and detail name a node stored nowhere.
    let mut tip = *a.last().unwrap();
    for s in [&local, &remote] {
        let absent = s
            .prepare(id(bootstrap::ids::TEXT), &Value::str("never stored"), true)
            .unwrap();
        let payload = Value::from_json_str(&format!(
            r#"{{"start":"{}","prev":"{}","role":"r","output":"{}","detail":"{}","agent":"a","startedAtMs":1,"completedAtMs":2,"cwd":"/"}}"#,
            a[0], a[a.len() - 1], absent.id, absent.id
        ))
        .unwrap();
        let step = s
            .prepare(id(bootstrap::ids::STEP_NODE), &payload, true)
            .unwrap();
        s.put(std::slice::from_ref(&step), 5).unwrap();
        tip = step.id;
    }
    let want = walked(&local, tip);
    assert!(want.iter().any(|e| e.starts_with("Missing")), "{want:?}");
    assert_eq!(walked(&remote, tip), want);
    assert_eq!(remote.refs(tip).unwrap(), local.refs(tip).unwrap());
    assert_eq!(remote.refs(NodeId(12345)).unwrap(), None);
    assert!(remote.verify(&|_, _| {}).unwrap().damage.is_empty());

    // References damaged in the database: verify names the node, reindex mends it.
    let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let k = (a[3].0 ^ (1 << 63)) as i64;
    c.execute("UPDATE uwf_nodes SET refs = '{}' WHERE id = $1", &[&k])
        .unwrap();
    let report = remote.verify(&|_, _| {}).unwrap();
    assert_eq!(report.damage, vec![Damage::WrongRefs(a[3])]);
    remote.reindex(&|_, _| {}).unwrap();
    assert!(remote.verify(&|_, _| {}).unwrap().damage.is_empty());
    assert_eq!(walked(&remote, tip), want);
    drop(remote);

    // Back to schema 2: the references as edge rows, then opened again.
    c.batch_execute(
        "CREATE TABLE uwf_edges (src bigint NOT NULL, pos integer NOT NULL, dst bigint NOT NULL,
                                 PRIMARY KEY (src, pos));
         INSERT INTO uwf_edges SELECT n.id, r.pos - 1, r.dst
             FROM uwf_nodes n, unnest(n.refs) WITH ORDINALITY AS r(dst, pos);
         ALTER TABLE uwf_nodes DROP COLUMN refs;
         DROP FUNCTION uwf_walk(bigint);
         DROP TABLE uwf_pins, uwf_gc_owner, uwf_gc_touched, uwf_usage_calls, uwf_usage,
                    uwf_usage_days, uwf_budgets, uwf_step_minutes;
         UPDATE uwf_meta SET value = 2 WHERE key = 'schema_version'",
    )
    .unwrap();
    let migrated = Store::open_url(&url, &|k| std::env::var(k).ok()).unwrap();
    assert_eq!(walked(&migrated, tip), want);
    assert!(migrated.verify(&|_, _| {}).unwrap().damage.is_empty());
    let v = schema_version_in(&mut c);
    assert_eq!(v as u64, uwf::store::PG_SCHEMA_VERSION);
}

/// A put on a server as on redb: an id stored with other bytes is a hash collision and leaves
/// nothing of its batch; a second put of a node keeps the earliest timestamp; a repeat in one
/// batch is one node.
#[test]
fn a_put_on_a_server_refuses_a_collision_and_keeps_the_earliest_time() {
    use crate::store::id;
    use uwf::store::{PutOutcome, Store};
    let Some(server) = pg::server() else { return };
    let url = server.fresh_database();
    let s = Store::open_url(&url, &|k| std::env::var(k).ok()).unwrap();
    let text = id(bootstrap::ids::TEXT);
    let a = s.prepare(text, &Value::str("a"), true).unwrap();
    let b = s.prepare(text, &Value::str("b"), true).unwrap();
    let out = s.put(&[a.clone(), b.clone(), a.clone()], 50).unwrap();
    assert_eq!(
        out,
        vec![
            PutOutcome::Inserted,
            PutOutcome::Inserted,
            PutOutcome::Existed
        ]
    );
    let mut forged = s.prepare(text, &Value::str("forged"), true).unwrap();
    forged.id = a.id;
    let c = s.prepare(text, &Value::str("c"), true).unwrap();
    let e = s.put(&[c.clone(), forged], 60).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "hash collision: node {} exists with different content",
            a.id
        )
    );
    assert!(s.get(c.id).unwrap().is_none(), "nothing of the batch");
    assert_eq!(s.get(a.id).unwrap().unwrap().payload_cbor, a.payload_cbor);
    // Again, earlier: the first-write time goes back; later: it stays.
    assert_eq!(
        s.put(std::slice::from_ref(&b), 10).unwrap(),
        vec![PutOutcome::Existed]
    );
    s.put(std::slice::from_ref(&b), 99).unwrap();
    let other = Store::open_url(&url, &|k| std::env::var(k).ok()).unwrap();
    for s in [&s, &other] {
        assert_eq!(s.get(b.id).unwrap().unwrap().timestamp, 10);
        assert_eq!(s.get(a.id).unwrap().unwrap().timestamp, 50);
    }
    // A batch large enough to go through COPY: write order is sequence order, and a node
    // stored before is left where it was.
    let many: Vec<_> = (0..700)
        .map(|n| s.prepare(text, &Value::str(format!("n{n}")), true).unwrap())
        .collect();
    let mut batch = many.clone();
    batch.insert(300, a.clone());
    let out = s.put(&batch, 70).unwrap();
    assert_eq!(
        out.iter().filter(|o| **o == PutOutcome::Inserted).count(),
        700
    );
    assert_eq!(out[300], PutOutcome::Existed);
    let mut want = vec![a.id, b.id];
    want.extend(many.iter().map(|p| p.id));
    let text_nodes = other.list_by_type(text).unwrap();
    assert_eq!(text_nodes, want);
}

/// A thread's chain is read ahead on a server by following each step's first reference; with
/// those references damaged into a loop, the read ahead stops and the chain is still read from
/// the steps themselves: the same roles, and `cas verify` names the damage.
#[test]
fn a_chain_whose_stored_references_loop_reads_the_same() {
    let Some(server) = pg::server() else { return };
    let url = server.fresh_database();
    let env = env_on(&url);
    let script_path = put_ten_roles(&env);
    let t = env
        .ok(&["thread", "start", "ten", "-p", "loop", "-q"])
        .trim()
        .to_string();
    let agent = format!("uwf agent scripted --script {}", p(&script_path));
    for _ in 0..4 {
        env.ok(&["thread", "step", &t, "--agent", &agent]);
    }
    let want = env.roles(&t);
    assert_eq!(want, ["r0", "r1", "r2", "r3"]);
    let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let step_type = (NodeId::parse(bootstrap::ids::STEP_NODE).unwrap().0 ^ (1 << 63)) as i64;
    let damaged = c
        .execute(
            "UPDATE uwf_nodes SET refs = array[id] || refs[2:] WHERE type = $1",
            &[&step_type],
        )
        .unwrap();
    assert_eq!(damaged, 4);
    assert_eq!(env.roles(&t), want);
    let r = env.run(&["cas", "verify"]);
    assert_ne!(r.code, 0, "{}", r.stdout);
    assert!(
        r.stdout.contains("stored references differ") && r.stdout.contains("\"damageCount\":4"),
        "{} {}",
        r.stdout,
        r.stderr
    );
}

/// Milliseconds since the epoch, by the system clock.
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
