//! `config.yaml` (the parts the engine reads) and `.env`.
//!
//! The config is the TypeScript tool's (`providers`, `models`, `agents`, `defaultAgent`,
//! `defaultModel`, `agentOverrides`, `modelOverrides`) plus `timeoutSeconds`, the agent time
//! limit. Only what choosing an agent needs is checked here; the LLM settings are read where
//! they are used.

use super::ThreadError;
use crate::cas::Value;
use crate::llm::{ClientOptions, Provider, Secret};
use std::path::Path;
use std::time::Duration;

/// How an agent is called and how it reads and writes the thread.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub(crate) enum AgentProtocol {
    /// uwf's own: `<command> …args <thread-id> <role>`, `UWF_*` variables, the store shared
    /// with the agent.
    #[default]
    Uwf,
    /// The TypeScript tool's (7a0c): `<command> …args --thread T --role R --prompt P`; the
    /// agent reads `threads.yaml` and `cas/` under `UNCAGED_WORKFLOW_STORAGE_ROOT` and writes
    /// its nodes there.
    Ts7a0c,
}

impl AgentProtocol {
    /// Reads a protocol name: `uwf` or `7a0c`.
    pub(crate) fn parse(s: &str) -> Option<AgentProtocol> {
        match s {
            "uwf" => Some(AgentProtocol::Uwf),
            "7a0c" => Some(AgentProtocol::Ts7a0c),
            _ => None,
        }
    }
}

/// An agent command: the program, its leading arguments and its protocol.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct AgentCommand {
    /// The program.
    pub command: String,
    /// Arguments before those the protocol adds.
    pub args: Vec<String>,
    /// How it is called.
    pub protocol: AgentProtocol,
}

impl AgentCommand {
    /// Splits a `--agent` value into command and arguments with the shell's word rules:
    /// white space separates words, quotes and backslashes keep a word whole
    /// (`agent --name 'code reviewer'` has three words). Nothing else of the shell applies.
    ///
    /// # Errors
    /// [`ThreadError::Config`] for an empty value or unbalanced quotes.
    pub(crate) fn parse(s: &str) -> Result<AgentCommand, ThreadError> {
        let mut parts = split_words(s, "--agent")?.into_iter();
        let command = parts
            .next()
            .ok_or_else(|| ThreadError::Config("--agent must not be empty".into()))?;
        Ok(AgentCommand {
            command,
            args: parts.collect(),
            protocol: AgentProtocol::Uwf,
        })
    }

    /// The command line as one string (for messages).
    pub(crate) fn display(&self) -> String {
        std::iter::once(self.command.as_str())
            .chain(self.args.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// `s` split into words with the shell's quoting rules; `what` names the value in errors.
fn split_words(s: &str, what: &str) -> Result<Vec<String>, ThreadError> {
    shell_words::split(s)
        .map_err(|_| ThreadError::Config(format!("{what} has an unclosed quote: {s}")))
}

/// The engine's view of `config.yaml`.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Config {
    /// The whole document (empty object when there is no file).
    pub doc: Value,
}

impl Config {
    /// Reads `<root>/config.yaml`; a missing file is an empty config.
    ///
    /// # Errors
    /// [`ThreadError::Config`] for unreadable or invalid YAML, or a document that is not a
    /// mapping.
    pub(crate) fn load(root: &Path) -> Result<Config, ThreadError> {
        let path = root.join("config.yaml");
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Config {
                    doc: Value::Object(Default::default()),
                });
            }
            Err(e) => {
                return Err(ThreadError::Config(format!(
                    "cannot read {}: {e}",
                    path.display()
                )));
            }
        };
        Config::parse(&text, &path.display().to_string())
    }

    /// Parses config text; `origin` names it in errors.
    ///
    /// # Errors
    /// As [`Config::load`].
    pub(crate) fn parse(text: &str, origin: &str) -> Result<Config, ThreadError> {
        let doc = crate::workflow::yaml::parse_str(text, None, origin)
            .map_err(|e| ThreadError::Config(format!("invalid config {origin}: {e}")))?;
        match doc {
            Value::Object(_) => Ok(Config { doc }),
            Value::Null => Ok(Config {
                doc: Value::Object(Default::default()),
            }),
            _ => Err(ThreadError::Config(format!(
                "invalid config {origin}: expected a mapping"
            ))),
        }
    }

    /// The agent time limit in seconds, if set.
    ///
    /// # Errors
    /// [`ThreadError::Config`] when `timeoutSeconds` is not a positive number.
    pub(crate) fn timeout_seconds(&self) -> Result<Option<f64>, ThreadError> {
        match self.doc.get("timeoutSeconds") {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) if *n > 0.0 && *n < 1e9 => Ok(Some(*n)),
            Some(v) => Err(ThreadError::Config(format!(
                "config.timeoutSeconds must be a positive number, got: {}",
                v.to_json()
            ))),
        }
    }

    /// The agent for `role` of workflow `workflow`: `agentOverrides[workflow][role]`, else
    /// `defaultAgent`, looked up in `agents`. An entry's `protocol` (`uwf`, the default, or
    /// `7a0c`) is uwf's addition; the TypeScript tool ignores it.
    ///
    /// # Errors
    /// [`ThreadError::Config`]: no agent configured, an unknown alias, a malformed entry.
    pub(crate) fn agent_for(
        &self,
        workflow: &str,
        role: &str,
    ) -> Result<AgentCommand, ThreadError> {
        let alias = self
            .doc
            .get("agentOverrides")
            .and_then(|o| o.get(workflow))
            .and_then(|w| w.get(role))
            .and_then(Value::as_str)
            .or_else(|| self.doc.get("defaultAgent").and_then(Value::as_str))
            .ok_or_else(|| {
                ThreadError::Config(
                    "no agent configured: run \"uwf setup\" to choose one, or pass --agent CMD"
                        .into(),
                )
            })?;
        let entry = self
            .doc
            .get("agents")
            .and_then(|a| a.get(alias))
            .ok_or_else(|| {
                ThreadError::Config(format!("unknown agent alias in config: {alias}"))
            })?;
        let command = entry
            .get("command")
            .and_then(Value::as_str)
            .filter(|c| !c.trim().is_empty())
            .ok_or_else(|| {
                ThreadError::Config(format!("config.agents.{alias} requires a command"))
            })?;
        let args = match entry.get("args") {
            Some(Value::Array(a)) => a
                .iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect(),
            // One string holds several arguments, split as `--agent` is.
            Some(Value::String(a)) => split_words(a, &format!("config.agents.{alias}.args"))?,
            _ => Vec::new(),
        };
        let protocol = match entry.get("protocol") {
            None | Some(Value::Null) => AgentProtocol::Uwf,
            Some(v) => v.as_str().and_then(AgentProtocol::parse).ok_or_else(|| {
                ThreadError::Config(format!(
                    "config.agents.{alias}.protocol must be \"uwf\" or \"7a0c\", got: {}",
                    v.to_json()
                ))
            })?,
        };
        Ok(AgentCommand {
            command: command.to_string(),
            args,
            protocol,
        })
    }
}

/// A model to call: its alias in `config.yaml`, the provider (key resolved) and the model id.
#[derive(Debug, Clone)]
pub struct ModelSetup {
    /// Where requests go, with the key.
    pub provider: Provider,
    /// The model id the provider knows (`models.<alias>.name`).
    pub model: String,
    /// Time limits and retries (`providers.<p>.timeoutSeconds`, `maxRetries`).
    pub options: ClientOptions,
    /// The key under `models:`.
    pub alias: String,
    /// Its price (`models.<alias>.price`), when configured.
    pub price: Option<Price>,
}

/// A model's price, USD per million tokens (`models.<alias>.price: {input, output,
/// cachedInput}`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Price {
    /// Input tokens not read from a cache.
    pub input: f64,
    /// Output tokens.
    pub output: f64,
    /// Input tokens read from the provider's cache (the input price when not given).
    pub cached_input: Option<f64>,
}

impl Price {
    /// The cost in USD of a call with these token counts (`input` counts the cached ones).
    pub fn cost(&self, input: u64, output: u64, cached: u64) -> f64 {
        let cached = cached.min(input);
        let fresh = (input - cached) as f64 * self.input;
        let read = cached as f64 * self.cached_input.unwrap_or(self.input);
        (fresh + read + output as f64 * self.output) / 1e6
    }

    /// The price at `models.<alias>.price`, checked.
    fn parse(alias: &str, v: &Value) -> Result<Price, ThreadError> {
        let bad = |m: &str| {
            ThreadError::Config(format!(
                "config.models.{alias}.price {m}: give {{input, output, cachedInput}} in USD per million tokens"
            ))
        };
        let Value::Object(m) = v else {
            return Err(bad("must be a mapping"));
        };
        let num = |k: &str| match m.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) if n.is_finite() && *n >= 0.0 => Ok(Some(*n)),
            Some(_) => Err(bad(&format!("{k} must be a number of at least 0"))),
        };
        let (Some(input), Some(output)) = (num("input")?, num("output")?) else {
            return Err(bad("needs input and output"));
        };
        Ok(Price {
            input,
            output,
            cached_input: num("cachedInput")?,
        })
    }
}

/// The name of an environment variable looked up for a key, and its value if set.
pub type Lookup<'a> = &'a dyn Fn(&str) -> Option<String>;

impl Config {
    /// The names under `agents:`.
    pub(crate) fn agent_names(&self) -> Vec<String> {
        match self.doc.get("agents") {
            Some(Value::Object(m)) => m.keys().cloned().collect(),
            _ => Vec::new(),
        }
    }

    /// The names under `models:` without a `price`.
    pub(crate) fn unpriced_models(&self) -> Vec<String> {
        match self.doc.get("models") {
            Some(Value::Object(m)) => m
                .iter()
                .filter(|(_, v)| v.get("price").is_none())
                .map(|(k, _)| k.clone())
                .collect(),
            _ => Vec::new(),
        }
    }

    /// The model alias for LLM extraction: `modelOverrides.extract`, else a model named
    /// `extract`, else one named `default`, else `defaultModel`.
    pub fn extract_model_alias(&self) -> Option<String> {
        self.scenario_model("extract")
    }

    /// The model alias of the built-in LLM agent: `modelOverrides.agent`, else `defaultModel`,
    /// else a model named `default`.
    pub fn agent_model_alias(&self) -> Option<String> {
        let s = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_string);
        s(self.doc.get("modelOverrides").and_then(|o| o.get("agent")))
            .or_else(|| s(self.doc.get("defaultModel")))
            .or_else(|| {
                self.doc
                    .get("models")
                    .and_then(|m| m.get("default"))
                    .map(|_| "default".to_string())
            })
    }

    fn scenario_model(&self, scenario: &str) -> Option<String> {
        let s = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_string);
        let models = self.doc.get("models");
        s(self.doc.get("modelOverrides").and_then(|o| o.get(scenario)))
            .or_else(|| {
                [scenario, "default"]
                    .into_iter()
                    .find(|k| models.and_then(|m| m.get(k)).is_some())
                    .map(str::to_string)
            })
            .or_else(|| s(self.doc.get("defaultModel")))
    }

    /// Whether output without valid frontmatter may be extracted by a model (`llmExtract`,
    /// default true).
    pub fn llm_extract(&self) -> bool {
        !matches!(self.doc.get("llmExtract"), Some(Value::Bool(false)))
    }

    /// The model `alias` with its provider; the key comes from `apiKey` (where `${VAR}` is
    /// replaced by the variable's value) or from the variable `apiKeyEnv` names, looked up with
    /// `lookup` (the environment, then `.env`).
    ///
    /// # Errors
    /// [`ThreadError::Config`] naming what is missing: the alias, the provider, its `baseUrl`
    /// or key, or a variable that is not set.
    pub fn model(&self, alias: &str, lookup: Lookup<'_>) -> Result<ModelSetup, ThreadError> {
        let bad = |m: String| ThreadError::Config(m);
        let models = match self.doc.get("models") {
            Some(Value::Object(m)) => m,
            None | Some(Value::Null) => {
                return Err(bad(format!(
                    "no model \"{alias}\" in config.yaml: run \"uwf setup\" to add one"
                )));
            }
            Some(_) => return Err(bad("config.models must be a mapping".into())),
        };
        let entry = models
            .get(alias)
            .ok_or_else(|| bad(format!("unknown model alias in config: {alias}")))?;
        let (Some(pname), Some(model)) = (
            entry.get("provider").and_then(Value::as_str),
            entry.get("name").and_then(Value::as_str),
        ) else {
            return Err(bad(format!(
                "config.models.{alias} requires provider and name"
            )));
        };
        let providers = match self.doc.get("providers") {
            Some(Value::Object(m)) => m,
            _ => return Err(bad("config.providers must be a mapping".into())),
        };
        let p = providers
            .get(pname)
            .ok_or_else(|| bad(format!("unknown provider in config: {pname}")))?;
        let base_url = p.get("baseUrl").and_then(Value::as_str);
        let key = match (
            p.get("apiKey").and_then(Value::as_str),
            p.get("apiKeyEnv").and_then(Value::as_str),
        ) {
            (Some(k), _) => Some(expand_vars(
                k,
                lookup,
                &format!("config.providers.{pname}.apiKey"),
            )?),
            (None, Some(var)) => Some(lookup(var).ok_or_else(|| {
                bad(format!(
                    "config.providers.{pname}.apiKeyEnv: {var} is not set (in the environment or .env)"
                ))
            })?),
            (None, None) => None,
        };
        let (Some(base_url), Some(key)) = (base_url, key) else {
            return Err(bad(format!(
                "config.providers.{pname} requires baseUrl and apiKey"
            )));
        };
        let mut options = ClientOptions::default();
        if let Some(t) = p.get("timeoutSeconds").and_then(Value::as_f64) {
            if !(t > 0.0 && t < 1e9) {
                return Err(bad(format!(
                    "config.providers.{pname}.timeoutSeconds must be a positive number"
                )));
            }
            options.request_timeout = Duration::from_secs_f64(t);
            options.overall_timeout = options.overall_timeout.max(options.request_timeout);
        }
        if let Some(n) = p.get("maxRetries").and_then(Value::as_f64) {
            options.max_retries = n.clamp(0.0, 20.0) as u32;
        }
        Ok(ModelSetup {
            provider: Provider {
                name: pname.to_string(),
                base_url: base_url.to_string(),
                api_key: (!key.is_empty()).then(|| Secret::new(key)),
            },
            model: model.to_string(),
            options,
            alias: alias.to_string(),
            price: entry
                .get("price")
                .map(|p| Price::parse(alias, p))
                .transpose()?,
        })
    }
}

/// `s` with every `${VAR}` replaced by the variable's value.
fn expand_vars(s: &str, lookup: Lookup<'_>, what: &str) -> Result<String, ThreadError> {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find("${") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        let end = after
            .find('}')
            .ok_or_else(|| ThreadError::Config(format!("{what} has an unclosed ${{")))?;
        let var = &after[..end];
        let value = lookup(var).ok_or_else(|| {
            ThreadError::Config(format!(
                "{what} names ${{{var}}}, which is not set (in the environment or .env)"
            ))
        })?;
        out.push_str(&value);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Parses `.env` text: `KEY=VALUE` lines, `export ` prefixes, `#` comments, single or double
/// quotes around the value.
pub(crate) fn parse_dotenv(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line);
        let Some((k, v)) = line.split_once('=') else {
            continue;
        };
        let k = k.trim();
        if k.is_empty() || !k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        let v = v.trim();
        let v = if v.len() >= 2
            && ((v.starts_with('"') && v.ends_with('"'))
                || (v.starts_with('\'') && v.ends_with('\'')))
        {
            let inner = &v[1..v.len() - 1];
            if v.starts_with('"') {
                inner.replace("\\n", "\n")
            } else {
                inner.to_string()
            }
        } else {
            v.split(" #").next().unwrap_or("").trim_end().to_string()
        };
        out.push((k.to_string(), v));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_resolution_order() {
        let c = Config::parse(
            "agents:\n  a: {command: uwf-a, args: [x, 1]}\n  b: {command: uwf-b}\ndefaultAgent: a\nagentOverrides:\n  wf: {r: b}\n",
            "t",
        )
        .unwrap();
        assert_eq!(c.agent_for("wf", "other").unwrap().display(), "uwf-a x");
        assert_eq!(c.agent_for("wf", "r").unwrap().display(), "uwf-b");
        let c = Config::parse("defaultAgent: zz\n", "t").unwrap();
        assert_eq!(
            c.agent_for("wf", "r").unwrap_err().to_string(),
            "unknown agent alias in config: zz"
        );
        assert!(Config::parse("", "t").unwrap().agent_for("w", "r").is_err());
    }

    #[test]
    fn agent_protocols() {
        let c = Config::parse(
            "agents:\n  h: {command: uwf-hermes, args: [], protocol: 7a0c}\n  u: {command: a, protocol: uwf}\n  d: {command: b}\n  x: {command: c, protocol: v2}\ndefaultAgent: h\nagentOverrides:\n  wf: {u: u, d: d, x: x}\n",
            "t",
        )
        .unwrap();
        let p = |role: &str| c.agent_for("wf", role).map(|a| a.protocol);
        assert_eq!(p("any").unwrap(), AgentProtocol::Ts7a0c);
        assert_eq!(p("u").unwrap(), AgentProtocol::Uwf);
        assert_eq!(p("d").unwrap(), AgentProtocol::Uwf);
        assert_eq!(
            p("x").unwrap_err().to_string(),
            "config.agents.x.protocol must be \"uwf\" or \"7a0c\", got: \"v2\""
        );
    }

    #[test]
    fn a_models_price_prices_its_calls_and_a_bad_one_is_one_line() {
        let c = Config::parse(
            "providers:\n  o: {baseUrl: 'http://x/v1', apiKey: k}\nmodels:\n  a: {provider: o, name: m, price: {input: 2, output: 8, cachedInput: 0.5}}\n  b: {provider: o, name: m, price: {input: 2, output: 8}}\n  c: {provider: o, name: m, price: {input: -1, output: 8}}\n  d: {provider: o, name: m, price: {output: 8}}\n  e: {provider: o, name: m, price: cheap}\n  f: {provider: o, name: m}\n",
            "t",
        )
        .unwrap();
        let none = |_: &str| None;
        let a = c.model("a", &none).unwrap().price.unwrap();
        // 1,000 input tokens of which 400 cached, 100 output: (600×2 + 400×0.5 + 100×8) / 1e6.
        assert!((a.cost(1_000, 100, 400) - 0.0022).abs() < 1e-12);
        // No cached price: cached tokens cost the input price.
        let b = c.model("b", &none).unwrap().price.unwrap();
        assert!((b.cost(1_000, 100, 400) - 0.0028).abs() < 1e-12);
        for (m, says) in [
            ("c", "input must be a number of at least 0"),
            ("d", "needs input and output"),
            ("e", "must be a mapping"),
        ] {
            let e = c.model(m, &none).unwrap_err().to_string();
            assert!(
                e.contains(&format!("config.models.{m}.price")) && e.contains(says),
                "{e}"
            );
            assert!(!e.contains('\n'), "{e}");
        }
        assert_eq!(c.model("f", &none).unwrap().price, None);
        assert_eq!(c.unpriced_models(), ["f"]);
    }

    #[test]
    fn models_and_keys() {
        let c = Config::parse(
            "providers:\n  o: {baseUrl: 'http://x/v1', apiKey: '${K}-2'}\n  e: {baseUrl: 'http://y', apiKeyEnv: KE, timeoutSeconds: 2}\n  n: {baseUrl: 'http://z'}\nmodels:\n  default: {provider: o, name: m1}\n  cheap: {provider: e, name: m2}\n  bad: {provider: n, name: m3}\n  lost: {provider: q, name: m4}\ndefaultModel: cheap\nmodelOverrides: {extract: default}\n",
            "t",
        )
        .unwrap();
        let env = |k: &str| match k {
            "K" => Some("sk-1".to_string()),
            "KE" => Some("sk-e".to_string()),
            _ => None,
        };
        assert_eq!(c.extract_model_alias().as_deref(), Some("default"));
        assert_eq!(c.agent_model_alias().as_deref(), Some("cheap"));
        let m = c.model("default", &env).unwrap();
        assert_eq!(
            (m.model.as_str(), m.provider.base_url.as_str()),
            ("m1", "http://x/v1")
        );
        assert_eq!(
            m.provider.api_key.as_ref().map(|k| k.expose()),
            Some("sk-1-2")
        );
        let m = c.model("cheap", &env).unwrap();
        assert_eq!(
            m.provider.api_key.as_ref().map(|k| k.expose()),
            Some("sk-e")
        );
        assert_eq!(m.options.request_timeout, Duration::from_secs(2));
        let err = |a: &str| c.model(a, &|_| None).unwrap_err().to_string();
        assert_eq!(err("bad"), "config.providers.n requires baseUrl and apiKey");
        assert_eq!(err("lost"), "unknown provider in config: q");
        assert_eq!(err("zz"), "unknown model alias in config: zz");
        assert_eq!(
            err("default"),
            "config.providers.o.apiKey names ${K}, which is not set (in the environment or .env)"
        );
        assert_eq!(
            err("cheap"),
            "config.providers.e.apiKeyEnv: KE is not set (in the environment or .env)"
        );
        // The scenario order: a model named `extract`, then `default`, then `defaultModel`.
        let c =
            Config::parse("models: {extract: {}, default: {}}\ndefaultModel: d\n", "t").unwrap();
        assert_eq!(c.extract_model_alias().as_deref(), Some("extract"));
        let c = Config::parse("defaultModel: d\nllmExtract: false\n", "t").unwrap();
        assert_eq!(c.extract_model_alias().as_deref(), Some("d"));
        assert!(!c.llm_extract());
    }

    #[test]
    fn dotenv_lines() {
        let v = parse_dotenv("# c\nA=1\nexport B=\"two words\"\nC='x' \nbad line\nD=v # note\n");
        assert_eq!(
            v,
            [
                ("A".into(), "1".into()),
                ("B".into(), "two words".into()),
                ("C".into(), "x".into()),
                ("D".into(), "v".into())
            ]
        );
    }
}
