//! `uwf setup` (providers, the default model and agent, written to `config.yaml` as the
//! TypeScript tool's setup writes them) and `uwf config list|get|set|path`.
//!
//! `config.yaml` is created with mode 0600 and replaced through a temporary file. Keys are
//! never printed: `config list` and `config get` mask every value under a secret-looking key.

use super::output::{print, write_stdout};
use super::{CliError, CliResult, Env};
use crate::ErrorKind;
use crate::cas::Value;
use crate::cas::value::Map;
use crate::interchange::config::{is_secret_key, names_a_variable, redact};
use crate::thread::Config;
use clap::{Args, Subcommand};
use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;

// `uwf setup`.
#[derive(Args, Debug, Default)]
pub(crate) struct SetupArgs {
    /// Provider name (e.g. openai, openrouter, ollama).
    #[arg(long)]
    provider: Option<String>,
    /// The provider's OpenAI-compatible base URL (known for openai, openrouter and ollama).
    #[arg(long)]
    base_url: Option<String>,
    /// The API key, written to config.yaml (see --api-key-env to keep it out of the file).
    #[arg(long, conflicts_with = "api_key_env")]
    api_key: Option<String>,
    /// The environment (or .env) variable that holds the API key: written as `apiKeyEnv`.
    #[arg(long, value_name = "VAR")]
    api_key_env: Option<String>,
    /// The model id the provider knows; becomes the model `default`.
    #[arg(long)]
    model: Option<String>,
    /// The default agent (default hermes; `llm` is uwf's built-in model agent).
    #[arg(long)]
    agent: Option<String>,
}

impl SetupArgs {
    fn any(&self) -> bool {
        self.provider.is_some()
            || self.base_url.is_some()
            || self.api_key.is_some()
            || self.api_key_env.is_some()
            || self.model.is_some()
            || self.agent.is_some()
    }
}

/// `uwf config …`.
#[derive(Subcommand, Debug)]
#[command(defer = true)]
pub(crate) enum ConfigCmd {
    /// The whole config, secrets masked.
    List,
    /// One value by dot path (`providers.openai.baseUrl`), secrets masked.
    Get {
        /// The dot path.
        path: String,
    },
    /// Set one value by dot path; the value is read as YAML (`30` is a number, `[a, b]` a list).
    Set {
        /// The dot path.
        path: String,
        /// The value.
        value: String,
    },
    /// The config file's path.
    Path,
}

fn known_base_url(provider: &str) -> Option<&'static str> {
    match provider {
        "openai" => Some("https://api.openai.com/v1"),
        "openrouter" => Some("https://openrouter.ai/api/v1"),
        "ollama" => Some("http://localhost:11434/v1"),
        _ => None,
    }
}

fn config_path(env: &Env) -> PathBuf {
    env.root.join("config.yaml")
}

/// The config document as it is on disk (an empty mapping when there is none).
fn load_doc(env: &Env) -> CliResult<Value> {
    Ok(Config::load(&env.root)?.doc)
}

/// Writes `doc` as `config.yaml` (YAML as the TypeScript tool writes it), mode 0600, through a
/// temporary file.
fn write_doc(env: &Env, doc: &Value) -> CliResult<PathBuf> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = config_path(env);
    std::fs::create_dir_all(&env.root)
        .map_err(|e| CliError::new(format!("cannot create {}: {e}", env.root.display())))?;
    let text = crate::interchange::yaml::stringify_value(doc);
    let tmp = env
        .root
        .join(format!(".config.yaml.{}.tmp", std::process::id()));
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, &path)
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        CliError::new(format!("cannot write {}: {e}", path.display()))
    })?;
    Ok(path)
}

fn object(v: Option<&Value>) -> Map {
    v.and_then(Value::as_object).cloned().unwrap_or_default()
}

/// What setup writes, as the TypeScript tool's setup does: the existing config first, then
/// `providers.<p>`, `models.default`, `agents.<a>` when missing, `defaultAgent`, and
/// `defaultModel` when there is none.
fn merged(existing: &Value, s: &Answers) -> Value {
    let mut doc = object(Some(existing));
    let mut providers = object(existing.get("providers"));
    let mut p = Map::default();
    p.insert("baseUrl".into(), Value::str(&s.base_url));
    match &s.key {
        Key::Literal(k) => p.insert("apiKey".into(), Value::str(k)),
        Key::Env(var) => p.insert("apiKeyEnv".into(), Value::str(var)),
    };
    providers.insert(s.provider.clone(), Value::Object(p));
    doc.insert("providers".into(), Value::Object(providers));
    let mut models = object(existing.get("models"));
    let mut m = Map::default();
    m.insert("provider".into(), Value::str(&s.provider));
    m.insert("name".into(), Value::str(&s.model));
    models.insert("default".into(), Value::Object(m));
    doc.insert("models".into(), Value::Object(models));
    let mut agents = object(existing.get("agents"));
    if !agents.contains_key(&s.agent) {
        let mut a = Map::default();
        a.insert("command".into(), Value::str(format!("uwf-{}", s.agent)));
        a.insert("args".into(), Value::Array(Vec::new()));
        agents.insert(s.agent.clone(), Value::Object(a));
    }
    doc.insert("agents".into(), Value::Object(agents));
    doc.insert("defaultAgent".into(), Value::str(&s.agent));
    let default_model = existing
        .get("defaultModel")
        .filter(|v| !matches!(v, Value::Null))
        .cloned()
        .unwrap_or_else(|| Value::str("default"));
    doc.insert("defaultModel".into(), default_model);
    Value::Object(doc)
}

enum Key {
    Literal(String),
    Env(String),
}

struct Answers {
    provider: String,
    base_url: String,
    key: Key,
    model: String,
    agent: String,
}

fn from_flags(a: SetupArgs) -> CliResult<Answers> {
    let usage = |m: &str| CliError::of(ErrorKind::Usage, m);
    let provider = a
        .provider
        .ok_or_else(|| usage("uwf setup needs --provider"))?;
    let base_url = match a.base_url {
        Some(u) => u,
        None => known_base_url(&provider)
            .map(str::to_string)
            .ok_or_else(|| usage("uwf setup needs --base-url for this provider"))?,
    };
    let key = match (a.api_key, a.api_key_env) {
        (Some(k), _) => Key::Literal(k),
        (None, Some(v)) => Key::Env(v),
        (None, None) => return Err(usage("uwf setup needs --api-key or --api-key-env")),
    };
    let model = a.model.ok_or_else(|| usage("uwf setup needs --model"))?;
    let agent = a.agent.unwrap_or_else(|| "hermes".into());
    Ok(Answers {
        provider,
        base_url,
        key,
        model,
        agent,
    })
}

/// Asks `q` on stderr and reads a line; an empty answer takes `default`.
fn ask(q: &str, default: &str) -> CliResult<String> {
    let mut err = std::io::stderr();
    if default.is_empty() {
        write!(err, "{q}: ")?;
    } else {
        write!(err, "{q} [{default}]: ")?;
    }
    err.flush()?;
    let mut line = String::new();
    if std::io::stdin().lock().read_line(&mut line)? == 0 {
        return Err(CliError::new(
            "uwf setup: input ended before setup was done",
        ));
    }
    let line = line.trim();
    Ok(if line.is_empty() { default } else { line }.to_string())
}

/// Asks on the terminal; the key is read without echo.
fn interactive(existing: &Value) -> CliResult<Answers> {
    let current = existing
        .get("models")
        .and_then(|m| m.get("default"))
        .cloned()
        .unwrap_or_default();
    let provider = ask(
        "Provider (openai, openrouter, ollama, or a name of yours)",
        current
            .get("provider")
            .and_then(Value::as_str)
            .unwrap_or("openrouter"),
    )?;
    let base_url = ask("Base URL", known_base_url(&provider).unwrap_or(""))?;
    if base_url.is_empty() {
        return Err(CliError::new("uwf setup: a base URL is needed"));
    }
    eprint!("API key (hidden; or $VAR to read it from that variable): ");
    std::io::stderr().flush()?;
    let key = rpassword::read_password()
        .map_err(|e| CliError::new(format!("uwf setup: cannot read the key: {e}")))?;
    let key = key.trim();
    let key = match key.strip_prefix('$') {
        Some(var) if !var.is_empty() => Key::Env(var.trim_matches(['{', '}']).to_string()),
        _ if key.is_empty() => return Err(CliError::new("uwf setup: an API key is needed")),
        _ => Key::Literal(key.to_string()),
    };
    let model = ask(
        "Model",
        current
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("openai/gpt-4o-mini"),
    )?;
    let agent = ask(
        "Default agent (llm is built in; hermes, claude-code)",
        "llm",
    )?;
    Ok(Answers {
        provider,
        base_url,
        key,
        model,
        agent,
    })
}

/// `uwf setup`.
pub(crate) fn setup(env: &Env, a: SetupArgs) -> CliResult {
    let existing = load_doc(env)?;
    let mut answers = if a.any() {
        from_flags(a)?
    } else if std::io::stdin().is_terminal() {
        interactive(&existing)?
    } else {
        return Err(CliError::of(
            ErrorKind::Usage,
            "uwf setup asks on a terminal; elsewhere give --provider, --api-key (or --api-key-env) and --model",
        ));
    };
    // An agent is named by its alias: `uwf-hermes` is `hermes`.
    if let Some(alias) = answers.agent.strip_prefix("uwf-") {
        answers.agent = alias.to_string();
    }
    let doc = merged(&existing, &answers);
    let path = write_doc(env, &doc)?;
    let mut out = Map::default();
    out.insert("config".into(), Value::str(path.display().to_string()));
    out.insert("provider".into(), Value::str(&answers.provider));
    out.insert("model".into(), Value::str(&answers.model));
    out.insert("defaultAgent".into(), Value::str(&answers.agent));
    print(env.format, &Value::Object(out))
}

/// A value for display: every value under a secret-looking key masked as an export masks
/// it, except what names a variable instead of holding a key (`apiKeyEnv`, a value that is
/// only `${VAR}`).
fn masked(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, x)| {
                    let shown = if is_secret_key(k) && !names_a_variable(k, x) {
                        redact(&Value::Object(
                            [(k.clone(), x.clone())].into_iter().collect(),
                        ))
                        .get(k)
                        .cloned()
                        .unwrap_or_default()
                    } else {
                        masked(x)
                    };
                    (k.clone(), shown)
                })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(masked).collect()),
        x => x.clone(),
    }
}

fn get_path<'a>(doc: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(doc, |v, k| v.get(k))
}

/// `uwf config …`.
pub(crate) fn config(env: &Env, c: ConfigCmd) -> CliResult {
    match c {
        ConfigCmd::Path => write_stdout(format!("{}\n", config_path(env).display()).as_bytes()),
        ConfigCmd::List => print(env.format, &masked(&load_doc(env)?)),
        ConfigCmd::Get { path } => {
            let doc = masked(&load_doc(env)?);
            let v = get_path(&doc, &path).ok_or_else(|| {
                CliError::of(
                    ErrorKind::NotFound,
                    format!("config has no value at {path}"),
                )
            })?;
            print(env.format, v)
        }
        ConfigCmd::Set { path, value } => {
            if path.split('.').any(str::is_empty) {
                return Err(CliError::of(
                    ErrorKind::Usage,
                    format!("not a dot path: {path:?}"),
                ));
            }
            let v = crate::workflow::yaml::parse_str(&value, None, "value")
                .map_err(|e| CliError::new(format!("invalid value: {e}")))?;
            let mut doc = load_doc(env)?;
            set_path(&mut doc, &path, v)?;
            // The result must still load as a config.
            Config::parse(
                &crate::interchange::yaml::stringify_value(&doc),
                "config.yaml",
            )?;
            write_doc(env, &doc)?;
            Ok(())
        }
    }
}

fn set_path(doc: &mut Value, path: &str, v: Value) -> CliResult {
    let keys: Vec<&str> = path.split('.').collect();
    let mut cur = doc;
    for (i, k) in keys.iter().enumerate() {
        if !matches!(cur, Value::Object(_)) {
            return Err(CliError::new(format!(
                "config {} is not a mapping",
                keys[..i].join(".")
            )));
        }
        let Value::Object(m) = cur else {
            unreachable!("checked above")
        };
        if i == keys.len() - 1 {
            m.insert((*k).to_string(), v);
            return Ok(());
        }
        cur = m
            .entry((*k).to_string())
            .or_insert_with(|| Value::Object(Map::default()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answers(agent: &str) -> Answers {
        Answers {
            provider: "openai".into(),
            base_url: "https://api.openai.com/v1".into(),
            key: Key::Literal("sk-1".into()),
            model: "gpt-4o-mini".into(),
            agent: agent.into(),
        }
    }

    #[test]
    fn merges_as_the_typescript_setup() {
        let existing = Value::from_json_str(
            r#"{"timeoutSeconds":30,"agents":{"llm":{"command":"uwf","args":["agent","llm"]}},"defaultModel":"fast"}"#,
        )
        .unwrap();
        let v = merged(&existing, &answers("llm"));
        assert_eq!(
            v.to_json(),
            r#"{"timeoutSeconds":30,"agents":{"llm":{"command":"uwf","args":["agent","llm"]}},"defaultModel":"fast","providers":{"openai":{"baseUrl":"https://api.openai.com/v1","apiKey":"sk-1"}},"models":{"default":{"provider":"openai","name":"gpt-4o-mini"}},"defaultAgent":"llm"}"#
        );
        let v = merged(&Value::Object(Map::default()), &answers("hermes"));
        assert_eq!(
            v.to_json(),
            r#"{"providers":{"openai":{"baseUrl":"https://api.openai.com/v1","apiKey":"sk-1"}},"models":{"default":{"provider":"openai","name":"gpt-4o-mini"}},"agents":{"hermes":{"command":"uwf-hermes","args":[]}},"defaultAgent":"hermes","defaultModel":"default"}"#
        );
    }

    #[test]
    fn set_makes_mappings_and_refuses_scalars() {
        let mut d = Value::from_json_str(r#"{"a":1}"#).unwrap();
        set_path(&mut d, "b.c", Value::Bool(true)).unwrap();
        assert_eq!(d.to_json(), r#"{"a":1,"b":{"c":true}}"#);
        assert!(set_path(&mut d, "a.x", Value::Null).is_err());
    }
}
