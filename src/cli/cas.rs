//! `uwf cas …`: the content-addressed store.

use super::output::{NodeIdStr, print, print_as, to_value};
use super::{CliError, CliResult, Env};
use crate::cas::bootstrap::META;
use crate::cas::{NodeId, Value, cbor, hash};
use crate::store::{GcOptions, Store, StoreError, WalkEvent};
use clap::Subcommand;
use serde::Serialize;
use std::cell::RefCell;

#[derive(Subcommand, Debug)]
#[command(defer = true)]
pub(crate) enum CasCommand {
    /// Print a node's type and payload.
    Get {
        /// Node id or unique prefix (4+ characters).
        id: String,
        /// Include the first-write timestamp.
        #[arg(long)]
        timestamp: bool,
    },
    /// Store a payload of a type, validated against the type's schema.
    Put {
        /// Type (schema) id.
        type_id: String,
        /// Inline JSON, a file path, or - for stdin.
        payload: String,
        /// Read one payload per line (JSON Lines) and store them in batches; prints one
        /// `{"hash"}` line per payload once its batch is committed.
        #[arg(long)]
        jsonl: bool,
        /// With --jsonl: payloads per transaction.
        #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
        commit_every: u64,
        /// Print only the id (one per line with --jsonl).
        #[arg(short = 'q', long)]
        quiet: bool,
    },
    /// Store a text node.
    PutText {
        /// The text.
        text: String,
        /// Print only the id.
        #[arg(short = 'q', long)]
        quiet: bool,
    },
    /// Print the id a payload would get, without storing or validating it.
    Hash {
        /// Type (schema) id.
        type_id: String,
        /// Inline JSON, a file path, or - for stdin.
        payload: String,
    },
    /// Whether a node exists (exit 1 when it does not).
    Has {
        /// Node id or prefix.
        id: String,
    },
    /// The ids a node references.
    Refs {
        /// Node id or prefix.
        id: String,
    },
    /// Every node reachable from a node, breadth-first, root first.
    Walk {
        /// Node id or prefix.
        id: String,
    },
    /// Rebuild the type index and the stored references from the nodes and their payloads.
    Reindex,
    /// Re-hash every node and check the derived data (type index, references).
    Verify,
    /// Remove the nodes no thread, history entry, registry name, schema or pin reaches.
    ///
    /// Nodes younger than the grace period are kept, with what they reach; so is anything a
    /// step in progress writes or puts again. Steps go on while it runs.
    Gc {
        /// Keep nodes first written less than this long ago (`0s`, `30m`, `2h`, `7d`).
        #[arg(long, default_value = "2h", value_parser = parse_duration)]
        grace: u64,
        /// Count what would be removed; change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Then shrink the store file (needs no other uwf process using it).
        #[arg(long, conflicts_with = "dry_run")]
        compact: bool,
    },
    /// Count nodes and bytes, and what no root reaches.
    Count,
    /// Keep nodes (and what they reach) through garbage collection.
    Pin {
        /// Node ids or unique prefixes.
        #[arg(required = true)]
        ids: Vec<String>,
    },
    /// Release pinned nodes.
    Unpin {
        /// Node ids or unique prefixes.
        #[arg(required = true)]
        ids: Vec<String>,
    },
    /// List pinned nodes.
    Pins,
    /// Schemas.
    #[command(subcommand)]
    Schema(SchemaCommand),
}

#[derive(Subcommand, Debug)]
#[command(defer = true)]
pub(crate) enum SchemaCommand {
    /// List schemas in registration order.
    List,
    /// Print a schema.
    Get {
        /// Schema id or prefix.
        id: String,
    },
    /// Register a schema (checked against the ocas keyword whitelist).
    Put {
        /// Inline JSON, a file path, or - for stdin.
        schema: String,
    },
}

/// `{"hash"}`: the id of a stored (or hashed) node.
#[derive(Serialize)]
struct Hash {
    hash: NodeIdStr,
}

/// `cas get`: a node's type and payload, and with `--timestamp` its first-write time.
#[derive(Serialize)]
struct Got {
    #[serde(rename = "type")]
    type_id: NodeIdStr,
    payload: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    timestamp: Option<u64>,
}

/// `cas has`.
#[derive(Serialize)]
struct Exists {
    exists: bool,
}

/// `cas refs`.
#[derive(Serialize)]
struct Refs {
    refs: Vec<NodeIdStr>,
}

/// `cas reindex`.
#[derive(Serialize)]
struct Reindexed {
    status: &'static str,
    nodes: u64,
}

/// `cas verify`: the damage and warning lists only when there are any.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Verified {
    status: &'static str,
    nodes: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    damage_count: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    damage: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    warning_count: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    warnings: Option<Vec<String>>,
}

/// One row of `cas schema list`.
#[derive(Serialize)]
struct SchemaRow {
    hash: NodeIdStr,
    title: String,
}

/// `cas walk`: the reachable ids, and the missing ones when there are any.
#[derive(Serialize)]
struct Walked {
    hashes: Vec<NodeIdStr>,
    #[serde(skip_serializing_if = "Option::is_none")]
    missing: Option<Vec<NodeIdStr>>,
}

/// `cas gc`: what was scanned, kept and removed (`dryRun`: what would be), and with
/// `--compact` the file size before and after.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Collected {
    dry_run: bool,
    scanned: u64,
    reachable: u64,
    garbage: u64,
    collected: u64,
    bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    file_bytes_before: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    file_bytes_after: Option<u64>,
}

/// `cas count`: nodes and payload bytes, and what no root reaches.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Counted {
    nodes: u64,
    bytes: u64,
    reachable: u64,
    garbage: u64,
    garbage_bytes: u64,
    file_bytes: u64,
}

/// `cas pin` / `cas unpin`: the ids whose pin changed.
#[derive(Serialize)]
struct Pinned {
    #[serde(skip_serializing_if = "Option::is_none")]
    pinned: Option<Vec<NodeIdStr>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    unpinned: Option<Vec<NodeIdStr>>,
}

/// One row of `cas pins`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PinRow {
    hash: NodeIdStr,
    pinned_at: u64,
}

/// `{"hash"}` of a stored node, or with `quiet` its id alone.
fn print_hash(env: &Env, id: NodeId, quiet: bool) -> CliResult {
    if quiet {
        super::output::write_stdout(format!("{}\n", id.to_wire()).as_bytes())
    } else {
        print_as(
            env.format,
            &Hash {
                hash: NodeIdStr(id),
            },
        )
    }
}

pub(crate) fn run(c: CasCommand, env: &Env) -> CliResult {
    match c {
        CasCommand::Get { id, timestamp } => cmd_get(env, &id, timestamp),
        CasCommand::Put {
            type_id,
            payload,
            jsonl: true,
            commit_every,
            quiet,
        } => put_jsonl(env, &type_id, &payload, commit_every as usize, quiet),
        CasCommand::Put {
            type_id,
            payload,
            quiet,
            ..
        } => cmd_put(env, &type_id, &payload, quiet),
        CasCommand::PutText { text, quiet } => cmd_put_text(env, text, quiet),
        CasCommand::Hash { type_id, payload } => cmd_hash(env, &type_id, &payload),
        CasCommand::Has { id } => cmd_has(env, &id),
        CasCommand::Refs { id } => cmd_refs(env, &id),
        CasCommand::Walk { id } => walk(env, &id),
        CasCommand::Reindex => cmd_reindex(env),
        CasCommand::Verify => cmd_verify(env),
        CasCommand::Gc {
            grace,
            dry_run,
            compact,
        } => cmd_gc(env, grace, dry_run, compact),
        CasCommand::Count => cmd_count(env),
        CasCommand::Pin { ids } => cmd_pin(env, &ids, true),
        CasCommand::Unpin { ids } => cmd_pin(env, &ids, false),
        CasCommand::Pins => cmd_pins(env),
        CasCommand::Schema(SchemaCommand::List) => cmd_schema_list(env),
        CasCommand::Schema(SchemaCommand::Get { id }) => cmd_schema_get(env, &id),
        CasCommand::Schema(SchemaCommand::Put { schema }) => cmd_schema_put(env, &schema),
    }
}

/// `cas get ID [--timestamp]`.
fn cmd_get(env: &Env, id: &str, timestamp: bool) -> CliResult {
    let s = env.open_ro()?;
    let id = resolve_stored(&s, id)?;
    let n = s.get(id)?.ok_or(StoreError::NotFound(id))?;
    // Refuse a record whose bytes no longer hash to its id or digest (a damaged file).
    if !n.is_intact() {
        return Err(StoreError::Corrupt(n.id).into());
    }
    let out = Got {
        type_id: NodeIdStr(n.type_id),
        payload: n.payload()?,
        timestamp: timestamp.then_some(n.timestamp),
    };
    print_as(env.format, &out)
}

/// `cas put TYPE PAYLOAD`.
fn cmd_put(env: &Env, type_id: &str, payload: &str, quiet: bool) -> CliResult {
    let type_id = parse_id(type_id)?;
    let payload = read_payload(payload)?;
    let s = env.open_rw()?;
    let p = s.prepare(type_id, &payload, true)?;
    s.put(std::slice::from_ref(&p), env.now_ms)?;
    print_hash(env, p.id, quiet)
}

/// `cas put-text TEXT`.
fn cmd_put_text(env: &Env, text: String, quiet: bool) -> CliResult {
    let s = env.open_rw()?;
    let text_type = crate::workflow::nodes::TEXT;
    let p = s.prepare(text_type, &Value::String(text), false)?;
    s.put(std::slice::from_ref(&p), env.now_ms)?;
    print_hash(env, p.id, quiet)
}

/// `cas hash TYPE PAYLOAD`.
fn cmd_hash(env: &Env, type_id: &str, payload: &str) -> CliResult {
    let type_id = parse_id(type_id)?;
    let payload = read_payload(payload)?;
    let bytes = cbor::encode(&payload);
    let self_id = hash::self_id(&bytes);
    // A self-typed node (the meta-schema) hashes its payload alone.
    let id = if self_id == type_id {
        self_id
    } else {
        hash::node_id(type_id, &bytes)
    };
    print_hash(env, id, false)
}

/// `cas has ID`: exit 1 when the node does not exist.
fn cmd_has(env: &Env, id: &str) -> CliResult {
    let s = env.open_ro()?;
    // An id that names no stored node, whatever its spelling, does not exist.
    let exists = match s.resolve(id) {
        Ok(id) => s.has(id)?,
        Err(StoreError::NoMatch(_) | StoreError::BadId(_) | StoreError::Ambiguous { .. }) => false,
        Err(e) => return Err(e.into()),
    };
    print_as(env.format, &Exists { exists })?;
    if exists {
        Ok(())
    } else {
        Err(CliError::new(""))
    }
}

/// `cas refs ID`.
fn cmd_refs(env: &Env, id: &str) -> CliResult {
    let s = env.open_ro()?;
    let id = resolve_stored(&s, id)?;
    let refs = s.refs(id)?.ok_or(StoreError::NotFound(id))?;
    let refs = refs.into_iter().map(NodeIdStr).collect();
    print_as(env.format, &Refs { refs })
}

/// `cas reindex`.
fn cmd_reindex(env: &Env) -> CliResult {
    let s = env.open_rw()?;
    let bar = Bar::new(env, "reindex");
    let n = s.reindex(&|d, t| bar.set(d, t))?;
    bar.finish();
    let out = Reindexed {
        status: "reindexed",
        nodes: n,
    };
    print_as(env.format, &out)
}

/// `cas verify`: exit 65 when the store is damaged.
fn cmd_verify(env: &Env) -> CliResult {
    let bar = Bar::new(env, "verify");
    let r = env
        .open_ro()
        .and_then(|s| Ok(s.verify(&|d, t| bar.set(d, t))?));
    bar.finish();
    let r = match r {
        Ok(r) => r,
        // Damage that stops the check is its finding: the report says so, and the
        // error line names the file and what to do.
        Err(e) if e.kind == crate::ErrorKind::Damaged => {
            let out = Verified {
                status: "damaged",
                nodes: 0,
                damage_count: Some(1),
                damage: Some(vec![e.message.clone()]),
                warning_count: None,
                warnings: None,
            };
            print_as(env.format, &out)?;
            return Err(e);
        }
        Err(e) => return Err(e),
    };
    let strings = |l: &[_]| l.iter().map(ToString::to_string).collect::<Vec<String>>();
    let clean = r.is_clean();
    let warned = r.warning_count > 0;
    let out = Verified {
        status: if clean { "ok" } else { "damaged" },
        nodes: r.nodes,
        damage_count: (!clean).then_some(r.damage_count),
        damage: (!clean).then(|| strings(&r.damage)),
        warning_count: warned.then_some(r.warning_count),
        warnings: warned.then(|| strings(&r.warnings)),
    };
    // On a damaged store such nodes are more of the damage: one line says it.
    if warned && clean {
        eprintln!(
            "warning: {} node(s) whose type is not a schema (kept as stored), first: {}",
            r.warning_count, r.warnings[0]
        );
    }
    print_as(env.format, &out)?;
    if clean {
        Ok(())
    } else {
        Err(CliError::of(
            crate::ErrorKind::Damaged,
            format!(
                "store {} is damaged: {} problem(s), first: {}; restore it from an export or a backup",
                env.server_url().map_or_else(
                    || env.db_path().display().to_string(),
                    crate::store::mask_url
                ),
                r.damage_count,
                r.damage[0]
            ),
        ))
    }
}

/// `cas gc [--grace D] [--dry-run] [--compact]`.
fn cmd_gc(env: &Env, grace_ms: u64, dry_run: bool, compact: bool) -> CliResult {
    let file_bytes = || std::fs::metadata(env.db_path()).map(|m| m.len()).ok();
    let mut s = if dry_run {
        env.open_ro()?
    } else {
        env.open_rw()?
    };
    // On a server, the bytes of uwf's tables there.
    let on_server = env.server_url().is_some();
    let before = if on_server {
        Some(s.size_bytes()?)
    } else {
        file_bytes()
    };
    let bar = Bar::new(env, "gc");
    let pid = std::process::id();
    let r = s.gc(&GcOptions {
        now_ms: env.now_ms,
        grace_ms,
        dry_run,
        owner: crate::store::Lease::of(pid, env.now_ms),
        owner_is_live: &crate::store::Lease::is_live,
        progress: &|d, t| bar.set(d, t),
    });
    bar.finish();
    let r = r?;
    let after = if compact {
        let bar = Bar::spinner(env, "compact");
        let c = s.compact();
        bar.finish();
        c?;
        if on_server {
            eprintln!(
                "compacted: VACUUM (ANALYZE) of uwf's tables on {}; the server reuses the space of removed rows",
                s.location()
            );
            Some(s.size_bytes()?)
        } else {
            drop(s);
            file_bytes()
        }
    } else {
        None
    };
    let out = Collected {
        dry_run,
        scanned: r.scanned,
        reachable: r.reachable,
        garbage: r.garbage,
        collected: r.collected,
        bytes: r.bytes,
        file_bytes_before: compact.then_some(before).flatten(),
        file_bytes_after: after,
    };
    tracing::info!(
        tag = "B7XQ2MCW",
        dry_run,
        grace_ms,
        scanned = out.scanned,
        reachable = out.reachable,
        collected = out.collected,
        bytes = out.bytes,
        compacted = compact,
        "gc"
    );
    print_as(env.format, &out)
}

/// `cas count`.
fn cmd_count(env: &Env) -> CliResult {
    let s = env.open_ro()?;
    let c = s.count()?;
    let out = Counted {
        nodes: c.nodes,
        bytes: c.bytes,
        reachable: c.reachable,
        garbage: c.garbage,
        garbage_bytes: c.garbage_bytes,
        file_bytes: if env.server_url().is_some() {
            s.size_bytes()?
        } else {
            std::fs::metadata(env.db_path()).map_or(0, |m| m.len())
        },
    };
    print_as(env.format, &out)
}

/// `cas pin ID…` (`pin`) and `cas unpin ID…`: prints the ids whose pin changed (an id that is
/// already pinned, or not pinned, is left alone).
fn cmd_pin(env: &Env, ids: &[String], pin: bool) -> CliResult {
    let s = env.open_rw()?;
    let ids = ids
        .iter()
        .map(|i| resolve_stored(&s, i))
        .collect::<CliResult<Vec<_>>>()?;
    let changed = if pin {
        s.pin(&ids, env.now_ms)?
    } else {
        s.unpin(&ids)?
    };
    let ids: Vec<NodeIdStr> = ids
        .iter()
        .zip(changed)
        .filter(|(_, c)| *c)
        .map(|(i, _)| NodeIdStr(*i))
        .collect();
    let (pinned, unpinned) = if pin {
        (Some(ids), None)
    } else {
        (None, Some(ids))
    };
    print_as(env.format, &Pinned { pinned, unpinned })
}

/// `cas pins`.
fn cmd_pins(env: &Env) -> CliResult {
    let s = env.open_ro()?;
    let rows: Vec<PinRow> = s
        .pins()?
        .into_iter()
        .map(|(id, t)| PinRow {
            hash: NodeIdStr(id),
            pinned_at: t,
        })
        .collect();
    print_as(env.format, &rows)
}

/// A duration such as `0s`, `90s`, `30m`, `2h` or `7d`, in milliseconds.
fn parse_duration(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (n, unit) = t.split_at(split);
    let bad = || format!("invalid duration \"{s}\": expected a number and s, m, h or d, like 30m");
    let n: u64 = n.parse().map_err(|_| bad())?;
    let ms: u64 = match unit {
        "ms" => 1,
        "s" => 1000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return Err(bad()),
    };
    n.checked_mul(ms).ok_or_else(bad)
}

/// `cas schema list`.
fn cmd_schema_list(env: &Env) -> CliResult {
    let s = env.open_ro()?;
    let ids = s.list_by_type(META)?;
    let snap = s.snapshot()?;
    let mut list = Vec::new();
    for id in ids {
        let title = if id == META {
            "(meta-schema)".to_string()
        } else {
            let p = snap.get(id)?.ok_or(StoreError::NotFound(id))?.payload()?;
            p.get("title")
                .or_else(|| p.get("description"))
                .and_then(Value::as_str)
                .unwrap_or("(unnamed)")
                .to_string()
        };
        list.push(SchemaRow {
            hash: NodeIdStr(id),
            title,
        });
    }
    print_as(env.format, &list)
}

/// `cas schema get ID`.
fn cmd_schema_get(env: &Env, id: &str) -> CliResult {
    let s = env.open_ro()?;
    let not_found = |x: &str| CliError::new(format!("Schema not found: {x}"));
    let id = match s.resolve(id) {
        Ok(i) => i,
        Err(StoreError::NoMatch(_)) => return Err(not_found(id)),
        Err(e) => return Err(e.into()),
    };
    match s.get(id)? {
        Some(n) if n.type_id == META => print(env.format, &n.payload()?),
        _ => Err(not_found(&id.to_wire())),
    }
}

/// `cas schema put SCHEMA`.
fn cmd_schema_put(env: &Env, schema: &str) -> CliResult {
    let schema = read_payload(schema)?;
    let s = env.open_rw()?;
    let p = s.prepare_schema(&schema)?;
    s.put(std::slice::from_ref(&p), env.now_ms)?;
    print_hash(env, p.id, false)
}

fn walk(env: &Env, id: &str) -> CliResult {
    let s = env.open_ro()?;
    let root = match s.resolve(id) {
        Ok(r) => r,
        Err(StoreError::NoMatch(_)) if id.len() == 13 => parse_id(id)?,
        Err(e) => return Err(e.into()),
    };
    let bar = Bar::spinner(env, "walk");
    let hashes = RefCell::new(Vec::new());
    let mut missing = Vec::new();
    let stats = s.walk(root, |e| match e {
        WalkEvent::Node(n) => {
            let mut h = hashes.borrow_mut();
            h.push(NodeIdStr(n));
            if h.len().is_multiple_of(65536) {
                bar.set(h.len() as u64, 0);
            }
        }
        WalkEvent::Missing(n) => {
            eprintln!("warning: node {n} is referenced but missing from the store");
            missing.push(NodeIdStr(n));
        }
    })?;
    bar.finish();
    let mut out = Walked {
        hashes: hashes.into_inner(),
        missing: None,
    };
    if stats.missing > 0 {
        out.missing = Some(missing);
        print_as(env.format, &out)?;
        return Err(CliError::new(format!(
            "walk found {} missing node(s)",
            stats.missing
        )));
    }
    print_as(env.format, &out)
}

fn put_jsonl(env: &Env, type_id: &str, source: &str, batch: usize, quiet: bool) -> CliResult {
    use std::io::BufRead;
    let type_id = parse_id(type_id)?;
    let reader: Box<dyn BufRead> = if source == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        let f = std::fs::File::open(source)
            .map_err(|e| CliError::new(format!("cannot read {source}: {e}")))?;
        Box::new(std::io::BufReader::new(f))
    };
    let s = env.open_rw()?;
    let mut pending = Vec::with_capacity(batch);
    let flush = |pending: &mut Vec<crate::store::Prepared>| -> CliResult {
        s.put(pending, env.now_ms)?;
        let mut out = String::new();
        for p in pending.drain(..) {
            if quiet {
                out.push_str(&p.id.to_wire());
            } else {
                out.push_str(
                    &to_value(&Hash {
                        hash: NodeIdStr(p.id),
                    })
                    .to_json(),
                );
            }
            out.push('\n');
        }
        super::output::write_stdout(out.as_bytes())
    };
    for (i, line) in reader.lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let v = Value::from_json_str(&line)
            .map_err(|e| CliError::new(format!("Cannot parse JSON on line {}: {e}", i + 1)))?;
        pending.push(
            s.prepare(type_id, &v, true)
                .map_err(|e| CliError::new(format!("line {}: {e}", i + 1)))?,
        );
        if pending.len() >= batch {
            flush(&mut pending)?;
        }
    }
    flush(&mut pending)
}

/// The stored node `input` names (an id or a unique prefix); `Node not found: <input>` for
/// anything else, a string outside the id alphabet included.
fn resolve_stored(s: &Store, input: &str) -> CliResult<NodeId> {
    match s.resolve(input) {
        Ok(id) => Ok(id),
        Err(StoreError::NoMatch(_) | StoreError::BadId(_)) => {
            Err(CliError::new(format!("Node not found: {input}")))
        }
        Err(e) => Err(e.into()),
    }
}

fn parse_id(s: &str) -> CliResult<NodeId> {
    NodeId::parse(s.trim()).map_err(|e| CliError::new(e.to_string()))
}

/// Reads a JSON payload given inline, as a file path, or `-` for stdin.
fn read_payload(arg: &str) -> CliResult<Value> {
    if arg == "-" {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut s)?;
        return Value::from_json_str(&s)
            .map_err(|e| CliError::new(format!("Cannot parse JSON from stdin: {e}")));
    }
    match Value::from_json_str(arg) {
        Ok(v) => Ok(v),
        Err(inline_err) => {
            let p = std::path::Path::new(arg);
            if p.is_file() {
                let text = std::fs::read_to_string(p)
                    .map_err(|e| CliError::new(format!("cannot read {arg}: {e}")))?;
                Value::from_json_str(&text)
                    .map_err(|e| CliError::new(format!("Cannot parse JSON from \"{arg}\": {e}")))
            } else {
                Err(CliError::new(format!(
                    "Cannot parse JSON from \"{arg}\": {inline_err}"
                )))
            }
        }
    }
}

/// A progress bar on stderr, drawn only on a terminal.
pub(crate) struct Bar(Option<indicatif::ProgressBar>);

impl Bar {
    pub(crate) fn new(env: &Env, label: &str) -> Bar {
        if !env.stderr_tty {
            return Bar(None);
        }
        let b = indicatif::ProgressBar::new(0);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "{msg} [{bar:40}] {pos}/{len} ({per_sec}, {eta})",
            )
            .expect("static template")
            .progress_chars("=> "),
        );
        b.set_message(label.to_string());
        Bar(Some(b))
    }

    pub(crate) fn spinner(env: &Env, label: &str) -> Bar {
        if !env.stderr_tty {
            return Bar(None);
        }
        let b = indicatif::ProgressBar::new_spinner();
        b.set_message(label.to_string());
        Bar(Some(b))
    }

    pub(crate) fn set(&self, done: u64, total: u64) {
        if let Some(b) = &self.0 {
            if total > 0 {
                b.set_length(total);
            }
            b.set_position(done);
        }
    }

    pub(crate) fn finish(&self) {
        if let Some(b) = &self.0 {
            b.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse_duration;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("0s"), Ok(0));
        assert_eq!(parse_duration("30m"), Ok(1_800_000));
        assert_eq!(parse_duration("2h"), Ok(7_200_000));
        assert_eq!(parse_duration("7d"), Ok(604_800_000));
        assert_eq!(parse_duration("250ms"), Ok(250));
        for bad in ["", "2", "h", "2w", "-1s", "1.5h"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
