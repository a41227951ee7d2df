//! OpenTelemetry traces of the steps, exported over OTLP/HTTP (protobuf) when the standard
//! `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set; the other
//! standard `OTEL_*` variables (headers, timeout, compression, service name) apply as the
//! exporter reads them. Off when neither is set, or with `OTEL_SDK_DISABLED=true`.
//!
//! One trace per thread: its id is the thread's 128-bit ULID (a BLAKE3 hash of the id for
//! other ids), so steps run by different processes and machines join it. Each step is a span
//! (thread, workflow, role, head, outcome) with a child for its agent and one for each model
//! call, carrying the GenAI attributes (`gen_ai.system`, `gen_ai.request.model`,
//! `gen_ai.usage.input_tokens`, `gen_ai.usage.output_tokens`). Spans carry ids, names,
//! outcomes and usage, never prompt or output text, never a key.
//!
//! Exporting never blocks or fails a step: spans go to a bounded queue that the SDK's batch
//! processor sends from its own thread with a short time limit (a full queue drops spans), and
//! the queue is flushed when the process ends, within a second.

use crate::cas::NodeId;
use crate::cas::id::digit_value;
use crate::store::ModelCall;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry::trace::{Span, SpanKind, Status, TraceContextExt, TraceId, Tracer};
use opentelemetry::{Context, KeyValue, global};
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, IdGenerator, RandomIdGenerator, SdkTracerProvider,
};
use std::cell::{Cell, RefCell};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Whether traces are exported by this process.
static ENABLED: AtomicBool = AtomicBool::new(false);

/// The tracer of this process, made once.
static TRACER: OnceLock<opentelemetry_sdk::trace::SdkTracer> = OnceLock::new();

thread_local! {
    /// The trace id the next root span of this OS thread gets (the step's thread).
    static NEXT_TRACE: Cell<Option<u128>> = const { Cell::new(None) };
    /// The model calls of the StepNode this OS thread wrote last (its id with them), so that
    /// a step run in this process need not read them back from the store.
    static WRITTEN: RefCell<Option<(NodeId, Vec<ModelCall>)>> = const { RefCell::new(None) };
}

/// Notes the calls kept with StepNode `step`, written by this OS thread (traces are on).
pub(crate) fn wrote(step: NodeId, calls: &[ModelCall]) {
    if enabled() {
        WRITTEN.with(|w| *w.borrow_mut() = Some((step, calls.to_vec())));
    }
}

/// The calls this OS thread noted for `step`, if it wrote that StepNode.
pub(crate) fn written(step: NodeId) -> Option<Vec<ModelCall>> {
    WRITTEN.with(|w| match w.borrow_mut().take() {
        Some((id, calls)) if id == step => Some(calls),
        _ => None,
    })
}

/// Ids: a root span's trace id is the one [`NEXT_TRACE`] holds; the rest random.
#[derive(Debug, Default)]
struct ThreadTraces(RandomIdGenerator);

impl IdGenerator for ThreadTraces {
    fn new_trace_id(&self) -> TraceId {
        match NEXT_TRACE.with(Cell::get) {
            Some(id) => TraceId::from(id),
            None => self.0.new_trace_id(),
        }
    }

    fn new_span_id(&self) -> opentelemetry::trace::SpanId {
        self.0.new_span_id()
    }
}

/// The exporter of this process: flushes what is queued when dropped, within a second.
pub(crate) struct Exporter(SdkTracerProvider);

impl Drop for Exporter {
    fn drop(&mut self) {
        ENABLED.store(false, Ordering::SeqCst);
        let _ = self.0.shutdown_with_timeout(Duration::from_secs(1));
    }
}

/// Starts exporting when `var` (the environment) names an OTLP endpoint; `None` when traces
/// are off. A configuration the exporter refuses is reported on stderr once, and traces stay
/// off: never a failed command.
pub(crate) fn start(var: &dyn Fn(&str) -> Option<String>) -> Option<Exporter> {
    let set = |k: &str| var(k).filter(|v| !v.trim().is_empty());
    if set("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"))
        || set("OTEL_TRACES_EXPORTER").is_some_and(|v| v.eq_ignore_ascii_case("none"))
        || (set("OTEL_EXPORTER_OTLP_ENDPOINT").is_none()
            && set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_none())
    {
        return None;
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut builder = opentelemetry_otlp::SpanExporter::builder().with_http();
    if set("OTEL_EXPORTER_OTLP_TIMEOUT").is_none()
        && set("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT").is_none()
    {
        // A short limit: an unreachable receiver costs the batch thread two seconds a batch.
        builder = builder.with_timeout(Duration::from_secs(2));
    }
    let exporter = match builder.build() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("warning: traces are off: the OTLP exporter refused its settings: {e}");
            return None;
        }
    };
    let batch = BatchConfigBuilder::default()
        .with_max_queue_size(4096)
        .with_scheduled_delay(Duration::from_millis(500))
        .build();
    let processor = BatchSpanProcessor::builder(exporter)
        .with_batch_config(batch)
        .build();
    let service = set("OTEL_SERVICE_NAME").unwrap_or_else(|| "uwf".into());
    let provider = SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_id_generator(ThreadTraces::default())
        .with_resource(
            opentelemetry_sdk::Resource::builder()
                .with_service_name(service)
                .build(),
        )
        .build();
    global::set_tracer_provider(provider.clone());
    let _ = TRACER.set(provider.tracer("uwf"));
    ENABLED.store(true, Ordering::SeqCst);
    Some(Exporter(provider))
}

/// Whether this process exports traces (a step records what its spans need only then).
pub(crate) fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// The trace id of thread `thread`: its ULID's 128 bits, else the first 16 bytes of the
/// BLAKE3 hash of the id.
pub(crate) fn trace_id(thread: &str) -> u128 {
    let ulid = (thread.len() == 26)
        .then(|| {
            thread.bytes().try_fold(0u128, |acc, c| {
                let d = digit_value(c)?;
                acc.checked_mul(32)?.checked_add(u128::from(d))
            })
        })
        .flatten();
    ulid.unwrap_or_else(|| {
        let h = blake3::hash(thread.as_bytes());
        let mut b = [0u8; 16];
        b.copy_from_slice(&h.as_bytes()[..16]);
        u128::from_be_bytes(b)
    })
}

/// What one step's spans say.
#[derive(Debug, Default, Clone)]
pub(crate) struct StepSpan {
    /// The thread.
    pub thread: String,
    /// The workflow's name.
    pub workflow: String,
    /// The role the moderator chose (empty when the step ended before).
    pub role: String,
    /// When the step started and ended, ms since the epoch.
    pub started_ms: u64,
    pub ended_ms: u64,
    /// The head after the step (the StepNode), when it moved.
    pub head: Option<String>,
    /// `ok`, `completed`, or the error's kind.
    pub outcome: String,
    /// The error, when the step failed.
    pub error: Option<String>,
    /// The agent's command and when it ran, ms since the epoch.
    pub agent: Option<(String, u64, u64)>,
}

fn at(ms: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms)
}

/// Exports the spans of one step: the step, its agent, and each model call of `calls`.
pub(crate) fn step(s: &StepSpan, calls: &[ModelCall]) {
    let Some(tracer) = TRACER.get().filter(|_| enabled()) else {
        return;
    };
    NEXT_TRACE.with(|c| c.set(Some(trace_id(&s.thread))));
    let mut attrs = vec![
        KeyValue::new("uwf.thread", s.thread.clone()),
        KeyValue::new("uwf.workflow", s.workflow.clone()),
        KeyValue::new("uwf.role", s.role.clone()),
        KeyValue::new("uwf.outcome", s.outcome.clone()),
    ];
    if let Some(h) = &s.head {
        attrs.push(KeyValue::new("uwf.head", h.clone()));
    }
    let name = if s.role.is_empty() {
        "step".to_string()
    } else {
        format!("step {}", s.role)
    };
    let mut step = tracer
        .span_builder(name)
        .with_kind(SpanKind::Internal)
        .with_start_time(at(s.started_ms))
        .with_attributes(attrs)
        .start_with_context(tracer, &Context::new());
    NEXT_TRACE.with(|c| c.set(None));
    if let Some(e) = &s.error {
        step.set_status(Status::error(e.clone()));
    }
    let cx = Context::new().with_remote_span_context(step.span_context().clone());
    if let Some((agent, from, to)) = &s.agent {
        let mut a = tracer
            .span_builder(format!("agent {}", agent_name(agent)))
            .with_start_time(at(*from))
            .with_attributes([KeyValue::new("uwf.agent", agent_name(agent))])
            .start_with_context(tracer, &cx);
        a.end_with_timestamp(at(*to));
    }
    for c in calls {
        let mut attrs = vec![
            KeyValue::new("gen_ai.operation.name", "chat"),
            KeyValue::new("gen_ai.system", c.provider.clone()),
            KeyValue::new("gen_ai.request.model", c.model.clone()),
            KeyValue::new("gen_ai.usage.input_tokens", to_i64(c.input_tokens)),
            KeyValue::new("gen_ai.usage.output_tokens", to_i64(c.output_tokens)),
            KeyValue::new(
                "gen_ai.usage.cache_read.input_tokens",
                to_i64(c.cached_input_tokens),
            ),
        ];
        if let Some(cost) = c.cost_usd {
            attrs.push(KeyValue::new("uwf.cost_usd", cost));
        }
        let mut m = tracer
            .span_builder(format!("chat {}", c.model))
            .with_kind(SpanKind::Client)
            .with_start_time(at(c.started_ms))
            .with_attributes(attrs)
            .start_with_context(tracer, &cx);
        m.end_with_timestamp(at(c.started_ms + c.duration_ms));
    }
    step.end_with_timestamp(at(s.ended_ms));
}

/// The program an agent command runs, without its arguments (a prompt may be among them):
/// `uwf agent <name>` for the built-in agents.
fn agent_name(command: &str) -> String {
    let words: Vec<&str> = command.split_whitespace().take(3).collect();
    match words.as_slice() {
        ["uwf", "agent", name] => format!("uwf agent {name}"),
        [program, ..] => (*program).to_string(),
        [] => String::new(),
    }
}

fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_threads_trace_id_is_its_ulid() {
        // 26 Crockford digits: the ULID's 128 bits.
        assert_eq!(trace_id("00000000000000000000000001"), 1);
        assert_eq!(trace_id("7ZZZZZZZZZZZZZZZZZZZZZZZZZ"), u128::MAX);
        assert_eq!(
            trace_id("01ARZ3NDEKTSV4RRFFQ69G5FAV"),
            0x0156_3e3a_b5d3_d676_4c61_efb9_9302_bd5b
        );
        // Other ids: a hash, the same every time.
        let other = trace_id("thread-from-elsewhere");
        assert_eq!(other, trace_id("thread-from-elsewhere"));
        assert_ne!(other, trace_id("thread-from-elsewhere2"));
        assert_ne!(
            trace_id("8ZZZZZZZZZZZZZZZZZZZZZZZZZ"),
            0,
            "past 128 bits: hashed"
        );
    }

    #[test]
    fn an_agents_span_names_the_program_only() {
        assert_eq!(agent_name("uwf agent llm --model x"), "uwf agent llm");
        assert_eq!(agent_name("./agent.sh 'the prompt'"), "./agent.sh");
    }
}
