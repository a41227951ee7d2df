//! The store's contract, run on every backend: memory (the reference), a redb file and a
//! database of a private PostgreSQL server (skipped with a note when none can be had, unless
//! `CI` is set). Each contract is a function over a fresh `Store`; `contract!` makes one test
//! of it per backend, named `conformance::<contract>::<backend>`.

use uwf::cas::{NodeId, Value};
use uwf::store::{
    Budget, GcOptions, HistoryEntry, KEEP_MINUTES, Lease, MinuteRow, ModelCall, Phase, Prepared,
    PutOutcome, Removal, StepCounts, StepFailure, StepUsage, Store, StoreError, ThreadRecord,
    ThreadState, UsageRow, WalkEvent, WorkflowLimits, minute_of,
};
use uwf::workflow::nodes::{START_NODE, STEP_NODE, StartNode, StepNode, TEXT};
use uwf::workflow::{FinishReason, ThreadId};

/// A fresh store on each backend; `None` for PostgreSQL when no server can be had.
fn memory() -> Option<(Store, Option<tempfile::TempDir>)> {
    Some((Store::memory(), None))
}

fn redb() -> Option<(Store, Option<tempfile::TempDir>)> {
    let dir = tempfile::tempdir().expect("dir");
    let s = Store::open(&dir.path().join("uwf.redb")).expect("open");
    Some((s, Some(dir)))
}

fn postgres() -> Option<(Store, Option<tempfile::TempDir>)> {
    let url = crate::pg::server()?.fresh_database();
    Some((Store::open_url(&url, &|_| None).expect("connect"), None))
}

macro_rules! contract {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[test]
            fn memory() {
                if let Some((s, _dir)) = super::memory() {
                    super::$name(&s);
                }
            }
            #[test]
            fn redb() {
                if let Some((s, _dir)) = super::redb() {
                    super::$name(&s);
                }
            }
            #[test]
            fn postgres() {
                if let Some((s, _dir)) = super::postgres() {
                    super::$name(&s);
                }
            }
        }
    )*};
}

contract!(
    puts_and_ids,
    walks_and_refs,
    chains_and_heads,
    head_compare_and_swap,
    leases,
    thread_states,
    new_threads_at_once,
    registry_and_history,
    registry_order,
    limits_and_removals,
    pins_and_gc,
    gc_while_writers_run,
    verify_and_reindex,
    write_order_and_marks,
    usage_aggregate,
    budgets,
    steps_per_minute,
);

fn text(s: &Store, t: &str) -> Prepared {
    s.prepare(TEXT, &Value::str(t), true).expect("prepare")
}

fn tid(n: u8) -> ThreadId {
    ThreadId::new(1_700_000_000_000 + u64::from(n), [n; 10])
}

/// A workflow (a text node standing for one), a StartNode and `steps` StepNodes after it,
/// each with an output text; returns them in write order (the workflow, then the start).
fn chain(s: &Store, tag: &str, steps: usize) -> Vec<Prepared> {
    let workflow = text(s, &format!("workflow {tag}"));
    let start = s
        .prepare(
            START_NODE,
            &StartNode {
                workflow: Some(workflow.id),
                prompt: format!("task {tag}"),
                cwd: "/".into(),
            }
            .to_value(),
            true,
        )
        .expect("start");
    let mut out = vec![workflow, start.clone()];
    let mut prev = None;
    for i in 0..steps {
        let o = text(s, &format!("{tag} output {i}"));
        let step = s
            .prepare(
                STEP_NODE,
                &StepNode {
                    start: start.id,
                    prev,
                    role: "r".into(),
                    output: Some(o.id),
                    detail: Some(o.id),
                    agent: "a".into(),
                    edge_prompt: None,
                    started_at_ms: Some(1),
                    completed_at_ms: Some(2),
                    cwd: "/".into(),
                    assembled_prompt: None,
                }
                .to_value(),
                true,
            )
            .expect("step");
        prev = Some(step.id);
        out.push(o);
        out.push(step);
    }
    out
}

fn puts_and_ids(s: &Store) {
    // The bootstrap schemas are there, with the TypeScript tool's ids.
    assert!(
        s.has(NodeId::parse("CTS5P6RD8HMCS").expect("id"))
            .expect("has")
    );
    assert!(s.has(TEXT).expect("has"));
    let a = text(s, "hello");
    let b = text(s, "world");
    assert_eq!(
        s.put(&[a.clone(), b.clone(), a.clone()], 1000)
            .expect("put"),
        vec![
            PutOutcome::Inserted,
            PutOutcome::Inserted,
            PutOutcome::Existed
        ]
    );
    assert_eq!(
        s.put(std::slice::from_ref(&a), 2000).expect("put"),
        vec![PutOutcome::Existed]
    );
    let got = s.get(a.id).expect("get").expect("stored");
    assert_eq!(
        (
            got.id,
            got.type_id,
            got.payload_cbor.clone(),
            got.digest,
            got.timestamp
        ),
        (a.id, TEXT, a.payload_cbor.clone(), a.digest, 1000)
    );
    assert_eq!(got.payload().expect("payload"), Value::str("hello"));
    // An import may know an earlier first write.
    s.write(|w| w.put(std::slice::from_ref(&a), 10))
        .expect("put");
    assert_eq!(s.get(a.id).expect("get").expect("stored").timestamp, 10);
    // The same id with other bytes is a collision, and nothing of that put is written.
    let c = text(s, "third");
    let mut forged = b.clone();
    forged.digest[0] ^= 1;
    match s.put(&[c.clone(), forged], 3000) {
        Err(StoreError::HashCollision(id)) => assert_eq!(id, b.id),
        other => panic!("expected a collision, got {other:?}"),
    }
    assert!(!s.has(c.id).expect("has"));
    assert!(s.get(NodeId(12345)).expect("get").is_none());
    assert_eq!(s.list_by_type(TEXT).expect("list"), vec![a.id, b.id]);
    let n = s.node_count().expect("count");
    assert_eq!(s.counts().expect("counts").nodes, n);
}

fn walks_and_refs(s: &Store) {
    let nodes = chain(s, "w", 2);
    s.put(&nodes, 5).expect("put");
    let (start, step1, o1, step2) = (nodes[1].id, nodes[3].id, nodes[4].id, nodes[5].id);
    // A StepNode references its prev, start, detail and output, in schema order.
    assert_eq!(
        s.refs(step2).expect("refs"),
        Some(vec![step1, start, o1, o1])
    );
    assert_eq!(s.refs(NodeId(7)).expect("refs"), None);
    let mut seen = Vec::new();
    let stats = s.walk(step2, |e| seen.push(e)).expect("walk");
    assert_eq!(seen[0], WalkEvent::Node(step2), "root first");
    assert_eq!(stats.visited, 6);
    assert_eq!(stats.missing, 0);
    let mut ids: Vec<NodeId> = seen
        .iter()
        .map(|e| match e {
            WalkEvent::Node(id) | WalkEvent::Missing(id) => *id,
        })
        .collect();
    ids.sort();
    let mut want: Vec<NodeId> = nodes.iter().map(|p| p.id).collect();
    want.sort();
    assert_eq!(ids, want, "each node once");
    // A missing node is reported, never skipped.
    let orphan = chain(s, "orphan", 1);
    s.put(&orphan[3..], 6).expect("put the step alone");
    let mut missing = Vec::new();
    let stats = s
        .walk(orphan[3].id, |e| {
            if let WalkEvent::Missing(id) = e {
                missing.push(id);
            }
        })
        .expect("walk");
    missing.sort();
    let mut want = vec![orphan[1].id, orphan[2].id];
    want.sort();
    assert_eq!((stats.visited, missing), (1, want));
}

fn chains_and_heads(s: &Store) {
    let nodes = chain(s, "c", 3);
    s.put(&nodes, 7).expect("put");
    let t = tid(1);
    let head = nodes.last().expect("a step").id;
    let rec = ThreadRecord {
        head,
        workflow: None,
        updated_ms: 7,
    };
    s.write(|w| w.set_thread(&t, &rec)).expect("set");
    assert_eq!(s.thread(&t).expect("thread"), Some(rec.clone()));
    assert_eq!(s.threads().expect("threads"), vec![(t.clone(), rec)]);
    // Walking back from the head through `prev` reaches the start.
    let mut cur = head;
    let mut steps = 0;
    while let Some(n) = s.get(cur).expect("get") {
        if n.type_id != STEP_NODE {
            assert_eq!(n.id, nodes[1].id);
            break;
        }
        let step = StepNode::from_value(&n.payload().expect("payload")).expect("a step");
        steps += 1;
        cur = step.prev.unwrap_or(step.start);
    }
    assert_eq!(steps, 3);
    assert_eq!(s.counts().expect("counts").threads, 1);
}

fn head_compare_and_swap(s: &Store) {
    let nodes = chain(s, "cas", 2);
    s.put(&nodes, 1).expect("put");
    let t = tid(2);
    let at = |head: NodeId| ThreadRecord {
        head,
        workflow: None,
        updated_ms: 1,
    };
    s.write(|w| w.set_thread(&t, &at(nodes[3].id)))
        .expect("set");
    // A move checks the head it started from, inside the transaction that moves it.
    let advance = |from: NodeId, to: NodeId| {
        s.write(|w| {
            let cur = w.thread(&t)?.expect("active").head;
            if cur != from {
                return Err(StoreError::Internal("thread advanced concurrently".into()));
            }
            w.set_thread(&t, &at(to))
        })
    };
    advance(nodes[3].id, nodes[5].id).expect("the first move");
    let e = advance(nodes[3].id, nodes[5].id).expect_err("a stale move");
    assert!(e.to_string().contains("advanced concurrently"), "{e}");
    assert_eq!(
        s.thread(&t).expect("thread").expect("active").head,
        nodes[5].id
    );
    // A failed transaction leaves nothing behind.
    let r: Result<(), StoreError> = s.write(|w| {
        w.set_thread(&t, &at(nodes[1].id))?;
        Err(StoreError::Internal("give up".into()))
    });
    assert!(r.is_err());
    assert_eq!(
        s.thread(&t).expect("thread").expect("active").head,
        nodes[5].id
    );
}

fn leases(s: &Store) {
    let (a, b) = (tid(3), tid(4));
    let lease = |pid| Lease {
        pid,
        since_ms: 100,
        boot_id: "boot".into(),
        start_ticks: 42,
        expires_ms: None,
    };
    s.write(|w| {
        w.set_lease(&a, &lease(10))?;
        w.set_lease(&b, &lease(11))
    })
    .expect("take");
    let held = s.leases().expect("leases");
    assert_eq!(
        held.iter()
            .map(|(t, l)| (
                t.clone(),
                l.pid,
                l.since_ms,
                l.boot_id.clone(),
                l.start_ticks
            ))
            .collect::<Vec<_>>(),
        vec![
            (a.clone(), 10, 100, "boot".to_string(), 42),
            (b.clone(), 11, 100, "boot".to_string(), 42)
        ]
    );
    // A held lease whose holder renews it expires ahead where the store keeps an expiry.
    let now = now_ms();
    assert!(
        held.iter()
            .all(|(_, l)| l.expires_ms.is_none_or(|e| e > now))
    );
    s.write(|w| w.set_lease(&a, &lease(12))).expect("take over");
    assert_eq!(s.leases().expect("leases")[0].1.pid, 12);
    assert_eq!(s.counts().expect("counts").leases, 2);
}

fn thread_states(s: &Store) {
    let t = tid(5);
    assert_eq!(s.thread_state(&t).expect("state"), ThreadState::default());
    let st = ThreadState {
        phase: Phase::Paused,
        max_rounds: Some(4),
        failures: 2,
        last_error: Some(StepFailure {
            time_ms: 9,
            agent: "sh".into(),
            message: "exit 3".into(),
        }),
    };
    s.write(|w| w.set_thread_state(&t, &st)).expect("set");
    assert_eq!(s.thread_state(&t).expect("state"), st);
    assert_eq!(s.thread_states().expect("states"), vec![(t.clone(), st)]);
    // The default state keeps no row.
    s.write(|w| w.set_thread_state(&t, &ThreadState::default()))
        .expect("reset");
    assert!(s.thread_states().expect("states").is_empty());
}

/// Many new threads in one write: stored with their states; one whose id is taken refuses the
/// whole write.
fn new_threads_at_once(s: &Store) {
    let nodes = chain(s, "n", 1);
    s.put(&nodes, 7).expect("put");
    let rec = |ms: u64| ThreadRecord {
        head: nodes[1].id,
        workflow: None,
        updated_ms: ms,
    };
    let queued = ThreadState {
        phase: Phase::Queued,
        max_rounds: Some(3),
        ..ThreadState::default()
    };
    let many: Vec<(ThreadId, ThreadRecord, ThreadState)> = (10..40)
        .map(|i| {
            let st = if i % 3 == 0 {
                queued.clone()
            } else {
                ThreadState::default()
            };
            (tid(i), rec(u64::from(i)), st)
        })
        .collect();
    s.write(|w| w.insert_threads(&many)).expect("insert");
    assert_eq!(s.threads().expect("threads").len(), many.len());
    for (t, r, st) in &many {
        assert_eq!(s.thread(t).expect("thread").as_ref(), Some(r));
        assert_eq!(&s.thread_state(t).expect("state"), st);
    }
    let states = s.thread_states().expect("states");
    assert_eq!(states.len(), 10, "only the queued keep a state row");
    // One id already there: nothing of the write stays.
    let again = vec![
        (tid(50), rec(1), ThreadState::default()),
        (tid(20), rec(2), ThreadState::default()),
    ];
    let e = s.write(|w| w.insert_threads(&again)).expect_err("taken");
    assert!(e.to_string().contains(tid(20).as_str()), "{e}");
    assert_eq!(s.thread(&tid(50)).expect("thread"), None);
    assert_eq!(s.thread(&tid(20)).expect("thread"), Some(rec(20)));
}

/// Registration order: each name at its first registration (a new version or a rollback keeps
/// it), integer-like names first in ascending order, as a JavaScript object lists its keys.
fn registry_order(s: &Store) {
    let (w1, w2) = (text(s, "workflow one"), text(s, "workflow two"));
    s.put(&[w1.clone(), w2.clone()], 1).expect("put");
    for (name, w) in [
        ("review-loop", w1.id),
        ("debate", w1.id),
        ("10", w1.id),
        ("alpha", w2.id),
        ("7", w2.id),
        ("review-loop", w2.id),
        ("007", w1.id),
        ("debate", w2.id),
        ("debate", w1.id),
    ] {
        s.write(|tx| tx.registry_set(name, w, 10)).expect("reg");
    }
    let names = |s: &Store| -> Vec<String> {
        s.registry_in_order()
            .expect("registry")
            .into_iter()
            .map(|(n, _)| n)
            .collect()
    };
    assert_eq!(
        names(s),
        ["7", "10", "review-loop", "debate", "alpha", "007"]
    );
    assert_eq!(
        s.registry_in_order().expect("registry")[2],
        ("review-loop".to_string(), w2.id)
    );
}

fn registry_and_history(s: &Store) {
    let (w1, w2) = (text(s, "workflow one"), text(s, "workflow two"));
    s.put(&[w1.clone(), w2.clone()], 1).expect("put");
    s.write(|w| w.registry_set("debate", w1.id, 10))
        .expect("reg");
    s.write(|w| w.registry_set("debate", w2.id, 20))
        .expect("reg");
    s.write(|w| w.registry_set("alpha", w1.id, 30))
        .expect("reg");
    assert_eq!(
        s.registry().expect("registry"),
        vec![("alpha".to_string(), w1.id), ("debate".to_string(), w2.id)]
    );
    let versions = s.registry_history("debate").expect("history");
    assert_eq!(
        versions
            .iter()
            .map(|v| (v.workflow, v.time_ms))
            .collect::<Vec<_>>(),
        vec![(w1.id, 10), (w2.id, 20)]
    );
    let entry = |t: &ThreadId, at: u64| HistoryEntry {
        thread: t.as_str().to_string(),
        workflow: w1.id.into(),
        head: w2.id.into(),
        completed_at: at,
        reason: FinishReason::Completed,
    };
    let (a, b) = (tid(6), tid(7));
    s.write(|w| {
        w.append_history(&entry(&a, 1))?;
        w.append_history(&entry(&b, 2))?;
        w.append_history(&entry(&a, 3))
    })
    .expect("history");
    let mut all = Vec::new();
    s.for_each_history::<StoreError>(|h| {
        all.push((h.thread, h.completed_at));
        Ok(())
    })
    .expect("walk");
    assert_eq!(
        all,
        vec![
            (a.as_str().to_string(), 1),
            (b.as_str().to_string(), 2),
            (a.as_str().to_string(), 3)
        ]
    );
    // A visitor's error stops the walk and comes back as it is.
    let mut n = 0;
    let stop = s.for_each_history(|_| {
        n += 1;
        Err(StoreError::Internal("enough".into()))
    });
    assert!(matches!(stop, Err(StoreError::Internal(m)) if m == "enough"));
    assert_eq!(n, 1);
    assert_eq!(s.counts().expect("counts").history, 3);
    assert_eq!(s.counts().expect("counts").workflows, 2);
}

fn limits_and_removals(s: &Store) {
    let l = WorkflowLimits {
        concurrency: 2,
        drop: false,
        max_queue: Some(5),
        max_retries: None,
    };
    assert_eq!(
        s.write(|w| w.set_workflow_limits("debate", Some(&l)))
            .expect("set"),
        None
    );
    assert_eq!(
        s.workflow_limits().expect("limits"),
        vec![("debate".to_string(), l)]
    );
    assert_eq!(
        s.write(|w| w.set_workflow_limits("debate", None))
            .expect("unset"),
        Some(l)
    );
    assert!(s.workflow_limits().expect("limits").is_empty());
    let mark = s.removal_mark().expect("mark");
    s.write(|w| {
        w.record_removal(&Removal::Thread("T1".into()))?;
        w.record_removal(&Removal::WorkflowPurged("debate".into()))
    })
    .expect("record");
    assert_eq!(
        s.removals_since(mark).expect("since"),
        vec![
            Removal::Thread("T1".into()),
            Removal::WorkflowPurged("debate".into())
        ]
    );
    assert_eq!(s.removal_mark().expect("mark"), mark + 2);
    assert_eq!(s.removals_since(mark + 1).expect("since").len(), 1);
}

fn call(model: &str, input: u64, cost: Option<f64>) -> ModelCall {
    ModelCall {
        provider: "fake".into(),
        model: model.into(),
        input_tokens: input,
        output_tokens: 2,
        cached_input_tokens: 1,
        started_ms: 7,
        duration_ms: 5,
        cost_usd: cost,
    }
}

fn usage_aggregate(s: &Store) {
    let now = now_ms();
    let day = u32::try_from(now / 86_400_000).unwrap();
    let wf = NodeId(42);
    let calls = [
        call("a", 10, Some(0.5)),
        call("b", 20, None),
        call("a", 30, Some(0.25)),
    ];
    let (t1, t2) = (tid(1), tid(2));
    // No calls yet: no days.
    assert!(s.usage_days("debate").expect("days").is_empty());
    let add = |step: u64, thread: &ThreadId, role: &str, calls: &[ModelCall]| {
        s.write(|w| {
            w.add_usage(
                &StepUsage {
                    step: NodeId(step),
                    thread: thread.as_str(),
                    workflow: Some(wf),
                    workflow_name: "debate",
                    role,
                    calls,
                    day: None,
                },
                now,
            )
        })
        .expect("add usage");
    };
    add(1, &t1, "for", &calls);
    // A step's calls count once, however often they are recorded.
    add(1, &t1, "for", &calls);
    add(2, &t1, "for", &calls[..1]);
    add(3, &t2, "against", &calls[1..2]);
    let kept = s.step_usage(NodeId(1)).expect("step usage").expect("kept");
    assert_eq!(kept.calls, calls.to_vec());
    assert_eq!(
        (kept.thread.as_str(), kept.role.as_str()),
        (t1.as_str(), "for")
    );
    assert_eq!((kept.workflow, kept.day), (Some(wf), day));
    let mut steps = Vec::new();
    s.for_each_step_usage::<StoreError>(|(id, c)| {
        steps.push((id, c.calls.len()));
        Ok(())
    })
    .expect("each step");
    steps.sort();
    assert_eq!(steps, [(NodeId(1), 3), (NodeId(2), 1), (NodeId(3), 1)]);
    assert_eq!(s.step_usage(NodeId(9)).expect("step usage"), None);
    let rows = s.usage_rows(None).expect("rows");
    let key = |r: &UsageRow| (r.thread.clone(), r.role.clone(), r.model.clone());
    let mut keys: Vec<_> = rows.iter().map(key).collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            (t1.as_str().to_string(), "for".to_string(), "a".to_string()),
            (t1.as_str().to_string(), "for".to_string(), "b".to_string()),
            (
                t2.as_str().to_string(),
                "against".to_string(),
                "b".to_string()
            ),
        ]
    );
    let a = rows
        .iter()
        .find(|r| r.thread == t1.as_str() && r.model == "a")
        .unwrap();
    assert_eq!(a.day, day);
    assert_eq!(a.workflow, Some(wf));
    assert_eq!(
        (
            a.totals.calls,
            a.totals.input_tokens,
            a.totals.output_tokens
        ),
        (3, 50, 6)
    );
    assert_eq!(
        (a.totals.cached_input_tokens, a.totals.costed_calls),
        (3, 3)
    );
    assert!(
        (a.totals.cost_usd - 1.25).abs() < 1e-9,
        "{}",
        a.totals.cost_usd
    );
    let b = rows
        .iter()
        .find(|r| r.thread == t1.as_str() && r.model == "b")
        .unwrap();
    assert_eq!((b.totals.calls, b.totals.costed_calls), (1, 0));
    assert_eq!(b.totals.cost(), None);
    let only = s.usage_rows(Some(t2.as_str())).expect("rows of one thread");
    assert_eq!(only.len(), 1);
    assert_eq!(only[0].role, "against");
    assert_eq!(only[0].totals.input_tokens, 20);
    // An import gives the day the calls were counted on.
    s.write(|w| {
        w.add_usage(
            &StepUsage {
                step: NodeId(4),
                thread: t2.as_str(),
                workflow: None,
                workflow_name: "debate",
                role: "against",
                calls: &calls[..1],
                day: Some(7),
            },
            now,
        )
    })
    .expect("add an imported step");
    let only = s.usage_rows(Some(t2.as_str())).expect("rows of one thread");
    assert_eq!(only.len(), 2);
    assert_eq!((only[0].day, only[0].workflow), (7, None));
    assert_eq!(
        s.step_usage(NodeId(4)).expect("kept").map(|c| c.day),
        Some(7)
    );
    usage_days(s, day, &calls);
}

/// The days of a workflow after `usage_aggregate`'s writes: today's five calls and the
/// imported step's day 7, oldest first; another workflow's days, even under a longer name
/// that begins with this one, are its own.
fn usage_days(s: &Store, day: u32, calls: &[ModelCall]) {
    s.write(|w| {
        w.add_usage(
            &StepUsage {
                step: NodeId(5),
                thread: tid(3).as_str(),
                workflow: None,
                workflow_name: "debate-2",
                role: "for",
                calls: &calls[2..],
                day: Some(3),
            },
            now_ms(),
        )
    })
    .expect("add another workflow's step");
    let days = s.usage_days("debate").expect("days");
    assert_eq!(
        days.iter().map(|(d, _)| *d).collect::<Vec<_>>(),
        [7, day],
        "{days:?}"
    );
    let (old, today) = (days[0].1, days[1].1);
    assert_eq!(
        (old.calls, old.input_tokens, old.costed_calls, old.cost()),
        (1, 10, 1, Some(0.5))
    );
    assert_eq!(
        (
            today.calls,
            today.input_tokens,
            today.output_tokens,
            today.cached_input_tokens,
            today.costed_calls
        ),
        (5, 90, 10, 5, 3)
    );
    assert!((today.cost_usd - 1.25).abs() < 1e-9, "{today:?}");
    // The same totals as the day's own read.
    assert_eq!(s.day_usage("debate", day).expect("day"), today);
    let other = s.usage_days("debate-2").expect("days");
    assert_eq!(other.len(), 1);
    assert_eq!(
        (other[0].0, other[0].1.calls, other[0].1.cost()),
        (3, 1, Some(0.25))
    );
    assert!(s.usage_days("debat").expect("days").is_empty());
}

fn budgets(s: &Store) {
    let b = Budget {
        max_cost_per_thread: Some(0.5),
        max_tokens_per_thread: None,
        max_cost_per_day: Some(10.0),
    };
    assert_eq!(
        s.write(|w| w.set_budget("debate", Some(&b))).expect("set"),
        None
    );
    let d = Budget {
        max_tokens_per_thread: Some(1000),
        ..Budget::default()
    };
    s.write(|w| w.set_budget("*", Some(&d)))
        .expect("set defaults");
    assert_eq!(
        s.budgets().expect("budgets"),
        vec![("*".to_string(), d), ("debate".to_string(), b)]
    );
    assert_eq!(
        s.write(|w| w.set_budget("debate", None)).expect("unset"),
        Some(b)
    );
    assert_eq!(s.budgets().expect("budgets").len(), 1);
}

/// The steps per minute: a transaction's counts add to their (minute, workflow) rows once
/// each, a later one adds to them, a group commit's steps merge, a failed write counts
/// nothing, reads start at a minute, and rows older than 48 hours before the newest minute go.
fn steps_per_minute(s: &Store) {
    let row = |minute: u32, workflow: &str, steps: u64, failures: u64| MinuteRow {
        minute,
        workflow: workflow.into(),
        counts: StepCounts { steps, failures },
    };
    assert!(s.step_minutes(0).expect("minutes").is_empty());
    let now = now_ms();
    let m = minute_of(now);
    // Two days and more ago: the first counting write of a handle prunes nothing older.
    let old_ms = now - (u64::from(KEEP_MINUTES) + 5) * 60_000;
    s.write(|w| {
        w.count_step("a", old_ms);
        Ok(())
    })
    .expect("count an old step");
    assert_eq!(
        s.step_minutes(0).expect("minutes"),
        [row(minute_of(old_ms), "a", 1, 0)]
    );
    // A name no quoting may break.
    let odd = "x'y\\ é";
    s.write(|w| {
        w.count_step("a", now);
        w.count_step(odd, now);
        w.count_failure("a", now);
        w.count_step("a", now);
        Ok(())
    })
    .expect("count steps");
    // The old minute went with the write of a minute two days later.
    assert_eq!(
        s.step_minutes(0).expect("minutes"),
        [row(m, "a", 2, 1), row(m, odd, 1, 0)]
    );
    // Added to, not replaced.
    s.write(|w| {
        w.count_failure("a", now);
        Ok(())
    })
    .expect("count a failure");
    // A failed write counts nothing.
    let failed: Result<(), StoreError> = s.write(|w| {
        w.count_step("a", now);
        Err(StoreError::Internal("no".into()))
    });
    assert!(failed.is_err());
    // A group commit's steps (of many threads at once) add up.
    let next = now + 60_000;
    std::thread::scope(|sc| {
        for _ in 0..8 {
            sc.spawn(|| {
                s.write_grouped(move |w| {
                    w.count_step("a", next);
                    Ok(())
                })
                .expect("grouped count")
            });
        }
    });
    assert_eq!(
        s.step_minutes(0).expect("minutes"),
        [row(m, "a", 2, 2), row(m, odd, 1, 0), row(m + 1, "a", 8, 0)]
    );
    assert_eq!(
        s.step_minutes(m + 1).expect("minutes"),
        [row(m + 1, "a", 8, 0)]
    );
    assert!(s.step_minutes(m + 2).expect("minutes").is_empty());
}

fn owner() -> Lease {
    Lease::of(std::process::id(), 0)
}

fn gc(s: &Store, now_ms: u64, dry_run: bool) -> uwf::store::GcReport {
    s.gc(&GcOptions {
        now_ms,
        grace_ms: 0,
        dry_run,
        owner: owner(),
        owner_is_live: &|_| false,
        progress: &|_, _| {},
    })
    .expect("gc")
}

fn pins_and_gc(s: &Store) {
    let kept = chain(s, "kept", 2);
    let dropped = chain(s, "dropped", 2);
    let pinned = text(s, "pinned");
    let loose = text(s, "loose");
    s.put(&kept, 1).expect("put");
    s.put(&dropped, 1).expect("put");
    s.put(&[pinned.clone(), loose.clone()], 1).expect("put");
    let t = tid(8);
    let head = kept.last().expect("step").id;
    s.write(|w| {
        w.set_thread(
            &t,
            &ThreadRecord {
                head,
                workflow: None,
                updated_ms: 1,
            },
        )
    })
    .expect("thread");
    assert_eq!(s.pin(&[pinned.id], 5).expect("pin"), vec![true]);
    assert_eq!(s.pin(&[pinned.id], 6).expect("pin"), vec![false]);
    assert!(matches!(
        s.pin(&[NodeId(99)], 6),
        Err(StoreError::NotFound(_))
    ));
    assert_eq!(s.pins().expect("pins"), vec![(pinned.id, 5)]);
    let dry = gc(s, 100, true);
    assert_eq!(dry.garbage, dropped.len() as u64 + 1);
    assert!(s.has(loose.id).expect("has"), "a dry run removes nothing");
    let r = gc(s, 100, false);
    assert_eq!(r.collected, dropped.len() as u64 + 1);
    for p in &dropped {
        assert!(!s.has(p.id).expect("has"));
    }
    assert!(!s.has(loose.id).expect("has"));
    for p in kept.iter().chain([&pinned]) {
        assert!(s.has(p.id).expect("has"), "kept {}", p.id);
    }
    assert!(s.verify(&|_, _| {}).expect("verify").is_clean());
    assert_eq!(s.unpin(&[pinned.id]).expect("unpin"), vec![true]);
    assert_eq!(gc(s, 100, false).collected, 1);
    assert!(!s.has(pinned.id).expect("has"));
}

fn gc_while_writers_run(s: &Store) {
    let t = tid(9);
    let first = chain(s, "live", 0);
    s.put(&first, 1).expect("put");
    s.write(|w| {
        w.set_thread(
            &t,
            &ThreadRecord {
                head: first[1].id,
                workflow: None,
                updated_ms: 1,
            },
        )
    })
    .expect("thread");
    let garbage: Vec<Prepared> = (0..50).map(|i| text(s, &format!("junk {i}"))).collect();
    s.put(&garbage, 1).expect("put");
    std::thread::scope(|sc| {
        let writer = sc.spawn(|| {
            // A writer extends the thread step by step, each node written after the
            // collection's grace cut-off, each head moved in a transaction of its own.
            let mut heads = Vec::new();
            for i in 0..20 {
                let c = chain(s, &format!("live {i}"), 1);
                s.put(&c, 1_000 + i).expect("put");
                let head = c.last().expect("step").id;
                s.write(|w| {
                    w.set_thread(
                        &t,
                        &ThreadRecord {
                            head,
                            workflow: None,
                            updated_ms: 2,
                        },
                    )
                })
                .expect("move");
                heads.push(c);
            }
            heads
        });
        let mut rounds = 0;
        while !writer.is_finished() || rounds == 0 {
            s.gc(&GcOptions {
                now_ms: 1_000,
                grace_ms: 0,
                dry_run: false,
                owner: owner(),
                owner_is_live: &|_| false,
                progress: &|_, _| {},
            })
            .expect("gc");
            rounds += 1;
            // Room for the writer: a lock need not be fair.
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let chains = writer.join().expect("writer");
        let last = chains.last().expect("a chain");
        for p in last {
            assert!(s.has(p.id).expect("has"), "the head's chain is kept");
        }
    });
    for p in &garbage {
        assert!(!s.has(p.id).expect("has"), "old garbage is collected");
    }
    assert!(s.verify(&|_, _| {}).expect("verify").is_clean());
}

fn verify_and_reindex(s: &Store) {
    s.put(&chain(s, "v", 3), 1).expect("put");
    let before = s.verify(&|_, _| {}).expect("verify");
    assert!(before.is_clean(), "{:?}", before.damage);
    assert_eq!(before.nodes, s.node_count().expect("count"));
    let by_type = s.list_by_type(STEP_NODE).expect("list");
    let n = s.reindex(&|_, _| {}).expect("reindex");
    assert_eq!(n, s.node_count().expect("count"));
    assert_eq!(s.list_by_type(STEP_NODE).expect("list"), by_type);
    assert!(s.verify(&|_, _| {}).expect("verify").is_clean());
}

fn write_order_and_marks(s: &Store) {
    let m0 = s.write_mark().expect("mark");
    let batch: Vec<Prepared> = (0..5).map(|i| text(s, &format!("o {i}"))).collect();
    s.put(&batch, 1).expect("put");
    let m1 = s.write_mark().expect("mark");
    assert!(m1 >= m0 + 5);
    let mut seen = Vec::new();
    s.for_each_node_written_between::<StoreError>(m0, m1, |n| {
        seen.push(n.id);
        Ok(())
    })
    .expect("walk");
    assert_eq!(seen, batch.iter().map(|p| p.id).collect::<Vec<_>>());
    let (_, last) = s
        .last_written_before(m1)
        .expect("last")
        .expect("one written");
    assert_eq!(last, batch[4].id);
    let mut by_id = Vec::new();
    s.for_each_node::<StoreError>(|n| {
        by_id.push(n.id);
        Ok(())
    })
    .expect("walk");
    assert!(by_id.windows(2).all(|w| w[0] < w[1]), "in id order");
    assert_eq!(by_id.len() as u64, s.node_count().expect("count"));
}

/// Milliseconds since the epoch, by the system clock.
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
