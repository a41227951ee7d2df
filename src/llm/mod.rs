//! One client for OpenAI-compatible chat APIs (`POST {baseUrl}/chat/completions`).
//!
//! Async on tokio and reqwest (rustls with the `ring` provider; no system OpenSSL), with a
//! blocking entry point for the synchronous engine. Every request has a per-request and an
//! overall time limit; 429, 5xx and connection failures are retried with exponential backoff
//! and jitter, honouring `Retry-After`. A failure is one line naming the provider, the model,
//! the HTTP status and the provider's own message. The API key lives in a [`Secret`], which
//! never prints: not in `Debug`, not in `Display`, not in any error.

use crate::cas::Value;
use crate::cas::value::Map;
use std::fmt;
use std::time::{Duration, Instant};

/// An API key: sent in the `Authorization` header and nowhere else (masked in the logs).
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a key.
    pub fn new(key: impl Into<String>) -> Secret {
        let key = key.into();
        crate::logs::mask(&key);
        Secret(key)
    }

    /// The key, for the one place that sends it.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }

    /// The key masked for display: its last four characters at most, the rest as `*`.
    pub fn masked(&self) -> String {
        let n = self.0.chars().count();
        if n <= 8 {
            return "*".repeat(n.max(3));
        }
        let tail: String = self.0.chars().skip(n - 4).collect();
        format!("{}{tail}", "*".repeat(n - 4))
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// Where requests go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Provider {
    /// The provider's name in `config.yaml` (for messages).
    pub name: String,
    /// The API's base URL, e.g. `https://api.openai.com/v1`.
    pub base_url: String,
    /// The key, when the API needs one.
    pub api_key: Option<Secret>,
}

/// One chat message.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    /// `system`, `user` or `assistant`.
    pub role: String,
    /// The text.
    pub content: String,
}

impl Message {
    /// A message of `role` with `content`.
    pub fn new(role: &str, content: impl Into<String>) -> Message {
        Message {
            role: role.to_string(),
            content: content.into(),
        }
    }
}

/// A chat completion request.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    /// The model id the provider knows.
    pub model: String,
    /// The conversation.
    pub messages: Vec<Message>,
    /// Ask for a JSON object (`response_format: {type: json_object}`).
    pub json_object: bool,
    /// Sampling temperature, when set.
    pub temperature: Option<f64>,
}

impl ChatRequest {
    /// The request body, as the API takes it.
    pub fn body(&self) -> Value {
        let mut m = Map::default();
        m.insert("model".into(), Value::str(&self.model));
        let msgs = self
            .messages
            .iter()
            .map(|x| {
                let mut o = Map::default();
                o.insert("role".into(), Value::str(&x.role));
                o.insert("content".into(), Value::str(&x.content));
                Value::Object(o)
            })
            .collect();
        m.insert("messages".into(), Value::Array(msgs));
        if let Some(t) = self.temperature {
            m.insert("temperature".into(), Value::Number(t));
        }
        if self.json_object {
            let mut rf = Map::default();
            rf.insert("type".into(), Value::str("json_object"));
            m.insert("response_format".into(), Value::Object(rf));
        }
        Value::Object(m)
    }
}

/// Token counts of one reply.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Usage {
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Completion tokens.
    pub completion_tokens: u64,
    /// Both.
    pub total_tokens: u64,
    /// Prompt tokens read from the provider's cache (`prompt_tokens_details.cached_tokens`).
    pub cached_tokens: u64,
    /// The cost in USD, when the provider reports it (`usage.cost`).
    pub cost_usd: Option<f64>,
}

/// A reply.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatReply {
    /// The first choice's message content.
    pub content: String,
    /// The model that answered, as the provider names it.
    pub model: String,
    /// Token usage, zero when the provider gives none.
    pub usage: Usage,
    /// Requests made, retries included.
    pub attempts: u32,
}

/// Time limits and retries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientOptions {
    /// One request, from send to the whole body.
    pub request_timeout: Duration,
    /// All attempts and waits together.
    pub overall_timeout: Duration,
    /// Retries after the first attempt.
    pub max_retries: u32,
    /// The first backoff; doubled each retry, with up to 50 % jitter added.
    pub backoff: Duration,
    /// The longest wait between attempts (also caps `Retry-After`).
    pub max_backoff: Duration,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            request_timeout: Duration::from_secs(120),
            overall_timeout: Duration::from_secs(600),
            max_retries: 4,
            backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(30),
        }
    }
}

/// Why a chat request failed. Every message names the provider and the model; none holds
/// the key.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LlmError {
    /// The API answered with an error status.
    #[error("{provider} ({model}): HTTP {status}: {message}")]
    Status {
        /// The provider.
        provider: String,
        /// The model.
        model: String,
        /// The HTTP status.
        status: u16,
        /// The provider's own message (`error.message`), or the start of the body.
        message: String,
        /// Attempts made.
        attempts: u32,
    },
    /// No answer in time.
    #[error("{provider} ({model}): no reply within {secs}s")]
    Timeout {
        /// The provider.
        provider: String,
        /// The model.
        model: String,
        /// The limit that passed.
        secs: f64,
    },
    /// The connection failed.
    #[error("{provider} ({model}): cannot reach {url}: {message}")]
    Connect {
        /// The provider.
        provider: String,
        /// The model.
        model: String,
        /// The URL.
        url: String,
        /// Why.
        message: String,
    },
    /// The caller gave up waiting (an interrupt).
    #[error("{provider} ({model}): cancelled")]
    Cancelled {
        /// The provider.
        provider: String,
        /// The model.
        model: String,
    },
    /// The reply is not a chat completion.
    #[error("{provider} ({model}): malformed reply: {message}")]
    Malformed {
        /// The provider.
        provider: String,
        /// The model.
        model: String,
        /// What is wrong.
        message: String,
    },
}

impl LlmError {
    /// Whether a later attempt may succeed (a rate limit, a server error, no connection).
    pub fn retryable(&self) -> bool {
        match self {
            LlmError::Status { status, .. } => *status == 429 || *status >= 500,
            LlmError::Timeout { .. } | LlmError::Connect { .. } => true,
            LlmError::Malformed { .. } | LlmError::Cancelled { .. } => false,
        }
    }
}

/// An OpenAI-compatible client.
#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    opts: ClientOptions,
}

impl Client {
    /// A client with `opts`.
    ///
    /// # Errors
    /// The TLS stack cannot be set up.
    pub fn new(opts: ClientOptions) -> Result<Client, String> {
        // The one crypto provider this build carries; a second install is harmless.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .timeout(opts.request_timeout)
            .build()
            .map_err(|e| format!("cannot set up the HTTP client: {e}"))?;
        Ok(Client { http, opts })
    }

    /// Sends `req` to `provider`, retrying what may succeed later.
    ///
    /// # Errors
    /// [`LlmError`] once the retries or the overall time limit run out, or at once for an
    /// error that a retry cannot mend (401, 400, a malformed reply).
    pub async fn chat(
        &self,
        provider: &Provider,
        req: &ChatRequest,
    ) -> Result<ChatReply, LlmError> {
        let started = Instant::now();
        let deadline = started + self.opts.overall_timeout;
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            let left = deadline.saturating_duration_since(Instant::now());
            let outcome = match tokio::time::timeout(left, self.once(provider, req)).await {
                Ok(r) => r,
                Err(_) => Err((
                    LlmError::Timeout {
                        provider: provider.name.clone(),
                        model: req.model.clone(),
                        secs: self.opts.overall_timeout.as_secs_f64(),
                    },
                    None,
                )),
            };
            let (err, retry_after) = match outcome {
                Ok(mut reply) => {
                    reply.attempts = attempt;
                    return Ok(reply);
                }
                Err(e) => e,
            };
            if !err.retryable() || attempt > self.opts.max_retries {
                return Err(with_attempts(err, attempt));
            }
            let wait = retry_after
                .unwrap_or_else(|| backoff(self.opts.backoff, attempt, started))
                .min(self.opts.max_backoff);
            if Instant::now() + wait >= deadline {
                return Err(with_attempts(err, attempt));
            }
            tracing::warn!(
                tag = "DEWG17X2",
                provider = %provider.name,
                model = %req.model,
                attempt,
                wait_ms = wait.as_millis() as u64,
                error = %err,
                "model request failed; retrying"
            );
            tokio::time::sleep(wait).await;
        }
    }

    /// [`Client::chat`] from synchronous code, on a runtime of its own.
    ///
    /// # Errors
    /// As [`Client::chat`].
    pub fn chat_blocking(
        &self,
        provider: &Provider,
        req: &ChatRequest,
    ) -> Result<ChatReply, LlmError> {
        runtime(provider, req)?.block_on(self.chat(provider, req))
    }

    /// [`Client::chat_blocking`] that gives up as soon as `cancelled` returns true (it is
    /// asked every 20 ms), with [`LlmError::Cancelled`].
    ///
    /// # Errors
    /// As [`Client::chat`], or [`LlmError::Cancelled`].
    pub fn chat_blocking_until(
        &self,
        provider: &Provider,
        req: &ChatRequest,
        cancelled: &(dyn Fn() -> bool + Sync),
    ) -> Result<ChatReply, LlmError> {
        runtime(provider, req)?.block_on(async {
            let watch = async {
                while !cancelled() {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            };
            tokio::select! {
                r = self.chat(provider, req) => r,
                () = watch => Err(LlmError::Cancelled {
                    provider: provider.name.clone(),
                    model: req.model.clone(),
                }),
            }
        })
    }

    /// One attempt; on failure, the error and the `Retry-After` the server asked for.
    async fn once(
        &self,
        provider: &Provider,
        req: &ChatRequest,
    ) -> Result<ChatReply, (LlmError, Option<Duration>)> {
        let url = format!(
            "{}/chat/completions",
            provider.base_url.trim_end_matches('/')
        );
        let who = |e: LlmError| (e, None);
        let mut rb = self
            .http
            .post(&url)
            .header("content-type", "application/json")
            .body(req.body().to_json());
        if let Some(k) = &provider.api_key {
            rb = rb.header("authorization", format!("Bearer {}", k.expose()));
        }
        let resp = rb.send().await.map_err(|e| {
            who(transport_error(
                e,
                provider,
                &req.model,
                &url,
                self.opts.request_timeout,
            ))
        })?;
        let status = resp.status().as_u16();
        let retry_after = resp
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|s| s.trim().parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map(Duration::from_secs_f64);
        let body = resp.text().await.map_err(|e| {
            who(transport_error(
                e,
                provider,
                &req.model,
                &url,
                self.opts.request_timeout,
            ))
        })?;
        if !(200..300).contains(&status) {
            return Err((
                LlmError::Status {
                    provider: provider.name.clone(),
                    model: req.model.clone(),
                    status,
                    message: provider_message(&body),
                    attempts: 0,
                },
                retry_after,
            ));
        }
        parse_reply(&body).map_err(|message| {
            who(LlmError::Malformed {
                provider: provider.name.clone(),
                model: req.model.clone(),
                message,
            })
        })
    }
}

/// A runtime of its own for one blocking call.
fn runtime(provider: &Provider, req: &ChatRequest) -> Result<tokio::runtime::Runtime, LlmError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| LlmError::Connect {
            provider: provider.name.clone(),
            model: req.model.clone(),
            url: provider.base_url.clone(),
            message: format!("cannot start the I/O runtime: {e}"),
        })
}

fn with_attempts(e: LlmError, n: u32) -> LlmError {
    match e {
        LlmError::Status {
            provider,
            model,
            status,
            message,
            ..
        } => LlmError::Status {
            provider,
            model,
            status,
            message,
            attempts: n,
        },
        e => e,
    }
}

/// `base · 2^(attempt−1)` plus up to half of it again, the jitter drawn from the clock.
fn backoff(base: Duration, attempt: u32, since: Instant) -> Duration {
    let exp = base.saturating_mul(1u32 << (attempt - 1).min(16));
    let nanos = since.elapsed().subsec_nanos() as u64;
    let jitter = exp.mul_f64((nanos % 1000) as f64 / 2000.0);
    exp + jitter
}

fn transport_error(
    e: reqwest::Error,
    provider: &Provider,
    model: &str,
    url: &str,
    limit: Duration,
) -> LlmError {
    if e.is_timeout() {
        return LlmError::Timeout {
            provider: provider.name.clone(),
            model: model.to_string(),
            secs: limit.as_secs_f64(),
        };
    }
    // reqwest's message names the URL; the key is in a header and never in it.
    let mut message = e.to_string();
    let mut src = std::error::Error::source(&e);
    while let Some(s) = src {
        message = format!("{message}: {s}");
        src = s.source();
    }
    LlmError::Connect {
        provider: provider.name.clone(),
        model: model.to_string(),
        url: url.to_string(),
        message,
    }
}

/// The provider's message in an error body: `error.message`, `error` as a string, `message`,
/// else the body's first 200 characters on one line.
fn provider_message(body: &str) -> String {
    if let Ok(v) = Value::from_json_str(body) {
        let found = v
            .get("error")
            .and_then(|e| e.get("message").or(Some(e)))
            .and_then(Value::as_str)
            .or_else(|| v.get("message").and_then(Value::as_str));
        if let Some(m) = found {
            return m.to_string();
        }
    }
    let one: String = body.split_whitespace().collect::<Vec<_>>().join(" ");
    let cut: String = one.chars().take(200).collect();
    if cut.is_empty() {
        "(empty body)".to_string()
    } else {
        cut
    }
}

/// The content, model and usage of a chat completion body.
fn parse_reply(body: &str) -> Result<ChatReply, String> {
    let v = Value::from_json_str(body).map_err(|e| format!("not JSON ({e})"))?;
    let content = v
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .and_then(|c| c.get("message"))
        .and_then(|m| m.get("content"))
        .and_then(Value::as_str)
        .ok_or_else(|| "no choices[0].message.content".to_string())?
        .to_string();
    let n = |k: &str| {
        v.get("usage")
            .and_then(|u| u.get(k))
            .and_then(Value::as_f64)
            .filter(|x| *x >= 0.0)
            .map_or(0, |x| x as u64)
    };
    Ok(ChatReply {
        content,
        model: v
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        usage: Usage {
            prompt_tokens: n("prompt_tokens"),
            completion_tokens: n("completion_tokens"),
            total_tokens: n("total_tokens"),
            cached_tokens: v
                .get("usage")
                .and_then(|u| u.get("prompt_tokens_details"))
                .and_then(|d| d.get("cached_tokens"))
                .and_then(Value::as_f64)
                .filter(|x| *x >= 0.0)
                .map_or(0, |x| x as u64),
            cost_usd: v
                .get("usage")
                .and_then(|u| u.get("cost"))
                .and_then(Value::as_f64)
                .filter(|x| x.is_finite() && *x >= 0.0),
        },
        attempts: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_never_print() {
        let s = Secret::new("sk-live-0123456789abcdef");
        assert_eq!(format!("{s}"), "***");
        assert_eq!(format!("{s:?}"), "Secret(***)");
        assert_eq!(s.masked(), "********************cdef");
        assert_eq!(Secret::new("abc").masked(), "***");
        let p = Provider {
            name: "p".into(),
            base_url: "http://x".into(),
            api_key: Some(s),
        };
        assert!(!format!("{p:?}").contains("0123456789"));
    }

    #[test]
    fn provider_messages_and_replies() {
        assert_eq!(
            provider_message(r#"{"error":{"message":"Incorrect API key provided","type":"x"}}"#),
            "Incorrect API key provided"
        );
        assert_eq!(provider_message(r#"{"error":"overloaded"}"#), "overloaded");
        assert_eq!(
            provider_message("<html>\n bad\n gateway</html>"),
            "<html> bad gateway</html>"
        );
        let r = parse_reply(
            r#"{"model":"m1","choices":[{"message":{"role":"assistant","content":"hi"}}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}"#,
        )
        .unwrap();
        assert_eq!((r.content.as_str(), r.model.as_str()), ("hi", "m1"));
        assert_eq!(r.usage.total_tokens, 4);
        assert!(parse_reply(r#"{"choices":[]}"#).is_err());
        assert!(parse_reply("nope").is_err());
    }

    #[test]
    fn request_body_in_the_api_shape() {
        let r = ChatRequest {
            model: "gpt-x".into(),
            messages: vec![Message::new("system", "s"), Message::new("user", "u")],
            json_object: true,
            temperature: Some(0.0),
        };
        assert_eq!(
            r.body().to_json(),
            r#"{"model":"gpt-x","messages":[{"role":"system","content":"s"},{"role":"user","content":"u"}],"temperature":0,"response_format":{"type":"json_object"}}"#
        );
    }

    #[test]
    fn backoff_doubles_with_bounded_jitter() {
        let t = Instant::now();
        for a in 1..6 {
            let b = backoff(Duration::from_millis(100), a, t);
            let base = Duration::from_millis(100 * (1 << (a - 1)));
            assert!(b >= base && b <= base.mul_f64(1.5), "{a}: {b:?}");
        }
    }
}
