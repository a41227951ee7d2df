//! YAML reading with the `!include` tag.
//!
//! `!include <path>` is resolved relative to the directory of the file that contains it and must
//! stay inside that directory. A `.json` file is parsed as JSON, a `.yaml`/`.yml` file is parsed
//! as YAML (its own includes are confined to its own directory), anything else becomes its text.
//! Numbers follow the JavaScript rule of [`Value`]: every number is the nearest double.

use super::WorkflowError;
use crate::cas::Value;
use crate::cas::value::{Map, js_number_string};
use std::path::{Component, Path, PathBuf};
use yaml_serde::Value as Yaml;

/// Includes nested deeper than this are refused (a file including itself would never end).
pub(crate) const MAX_INCLUDE_DEPTH: usize = 32;

/// Reads and parses the YAML file at `path`, resolving `!include` tags.
///
/// # Errors
/// [`WorkflowError::FileNotFound`] when `path` does not exist, [`WorkflowError::Yaml`] when it
/// (or an included file) is not valid YAML, [`WorkflowError::Include`] when an include escapes
/// its directory, is missing, or cannot be read.
pub(crate) fn load_file(path: &Path) -> Result<Value, WorkflowError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(WorkflowError::FileNotFound(path.display().to_string()));
        }
        Err(e) => {
            return Err(WorkflowError::Read {
                path: path.display().to_string(),
                message: e.to_string(),
            });
        }
    };
    let dir = parent_dir(path);
    parse_at_depth(&text, Some(&dir), &path.display().to_string(), 0)
}

/// Parses YAML `text`; `!include` is resolved against `base_dir`, and refused when it is `None`.
///
/// # Errors
/// As [`load_file`]; `origin` names the text in messages.
pub(crate) fn parse_str(
    text: &str,
    base_dir: Option<&Path>,
    origin: &str,
) -> Result<Value, WorkflowError> {
    parse_at_depth(text, base_dir, origin, 0)
}

fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

fn parse_at_depth(
    text: &str,
    base_dir: Option<&Path>,
    origin: &str,
    depth: usize,
) -> Result<Value, WorkflowError> {
    let yaml: Yaml = yaml_serde::from_str(text).map_err(|e| WorkflowError::Yaml {
        origin: origin.to_string(),
        message: e.to_string(),
    })?;
    let ctx = Ctx {
        base_dir,
        origin,
        depth,
    };
    ctx.convert(yaml)
}

struct Ctx<'a> {
    base_dir: Option<&'a Path>,
    origin: &'a str,
    depth: usize,
}

impl Ctx<'_> {
    fn convert(&self, y: Yaml) -> Result<Value, WorkflowError> {
        Ok(match y {
            Yaml::Null => Value::Null,
            Yaml::Bool(b) => Value::Bool(b),
            Yaml::Number(n) => Value::Number(number(&n)),
            Yaml::String(s) => Value::String(s),
            Yaml::Sequence(items) => Value::Array(
                items
                    .into_iter()
                    .map(|x| self.convert(x))
                    .collect::<Result<_, _>>()?,
            ),
            Yaml::Mapping(m) => {
                let mut out = Map::with_capacity_and_hasher(m.len(), Default::default());
                for (k, v) in m {
                    let key = self.key(k)?;
                    out.insert(key, self.convert(v)?);
                }
                Value::Object(out)
            }
            Yaml::Tagged(t) => {
                if t.tag == "include" {
                    let Yaml::String(target) = t.value else {
                        return Err(self.include_err("(non-string)", "expects a file path"));
                    };
                    self.include(&target)?
                } else {
                    // Unknown tags are ignored, as the TypeScript `yaml` package does.
                    self.convert(t.value)?
                }
            }
        })
    }

    fn key(&self, k: Yaml) -> Result<String, WorkflowError> {
        Ok(match k {
            Yaml::String(s) => s,
            Yaml::Number(n) => js_number_string(number(&n)),
            Yaml::Bool(b) => b.to_string(),
            Yaml::Null => String::new(),
            Yaml::Tagged(t) => return self.key(t.value),
            Yaml::Sequence(_) | Yaml::Mapping(_) => {
                return Err(WorkflowError::Yaml {
                    origin: self.origin.to_string(),
                    message: "a mapping key must be a scalar".into(),
                });
            }
        })
    }

    fn include_err(&self, target: &str, problem: &str) -> WorkflowError {
        WorkflowError::Include {
            origin: self.origin.to_string(),
            target: target.to_string(),
            problem: problem.to_string(),
        }
    }

    fn include(&self, target: &str) -> Result<Value, WorkflowError> {
        let Some(dir) = self.base_dir else {
            return Err(self.include_err(target, "includes need a file location"));
        };
        if self.depth >= MAX_INCLUDE_DEPTH {
            return Err(self.include_err(target, "includes nested too deeply"));
        }
        let resolved = confine(dir, target).ok_or_else(|| {
            self.include_err(
                target,
                "path traversal blocked (includes must stay inside the including file's directory)",
            )
        })?;
        // A symbolic link must not lead outside the directory either.
        if let (Ok(real), Ok(real_dir)) = (resolved.canonicalize(), dir.canonicalize())
            && !real.starts_with(&real_dir)
        {
            return Err(self.include_err(
                target,
                "path traversal blocked (symbolic link leads outside the directory)",
            ));
        }
        let text = match std::fs::read_to_string(&resolved) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(self.include_err(target, "file not found"));
            }
            Err(e) => return Err(self.include_err(target, &e.to_string())),
        };
        let origin = resolved.display().to_string();
        let ext = resolved
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        match ext.as_deref() {
            Some("json") => Value::from_json_str(&text).map_err(|e| WorkflowError::Yaml {
                origin,
                message: format!("invalid JSON: {e}"),
            }),
            Some("yaml" | "yml") => {
                let sub = parent_dir(&resolved);
                parse_at_depth(&text, Some(&sub), &origin, self.depth + 1)
            }
            _ => Ok(Value::String(text)),
        }
    }
}

/// `dir/target` with `.` and `..` resolved lexically, or `None` when it leaves `dir`.
fn confine(dir: &Path, target: &str) -> Option<PathBuf> {
    let base = normalize(dir);
    let joined = normalize(&dir.join(target));
    joined
        .starts_with(&base)
        .then_some(joined)
        .filter(|p| p != &base)
}

fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

fn number(n: &yaml_serde::Number) -> f64 {
    if let Some(i) = n.as_i64() {
        i as f64
    } else if let Some(u) = n.as_u64() {
        u as f64
    } else {
        n.as_f64().unwrap_or(f64::NAN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn confine_blocks_escapes() {
        let d = Path::new("/a/b");
        assert_eq!(confine(d, "x.md"), Some(PathBuf::from("/a/b/x.md")));
        assert_eq!(confine(d, "sub/../x.md"), Some(PathBuf::from("/a/b/x.md")));
        assert_eq!(confine(d, "../x.md"), None);
        assert_eq!(confine(d, "../../etc/passwd"), None);
        assert_eq!(confine(d, "/etc/passwd"), None);
        assert_eq!(confine(d, "/a/b/ok.md"), Some(PathBuf::from("/a/b/ok.md")));
        assert_eq!(confine(d, "."), None);
        let rel = Path::new("wf");
        assert_eq!(confine(rel, "p.md"), Some(PathBuf::from("wf/p.md")));
        assert_eq!(confine(rel, "../p.md"), None);
    }

    #[test]
    fn numbers_follow_js() {
        let v = parse_str(
            "a: 1\nb: 1.5\nc: 9007199254740993\nd: -1e+21\n1: x",
            None,
            "t",
        )
        .unwrap();
        assert_eq!(
            v.to_json(),
            // an integer-like key comes first, as in a JavaScript object
            r#"{"1":"x","a":1,"b":1.5,"c":9007199254740992,"d":-1e+21}"#
        );
    }

    #[test]
    fn include_without_location_is_refused() {
        let e = parse_str("a: !include x.md", None, "inline").unwrap_err();
        assert!(
            e.to_string().contains("includes need a file location"),
            "{e}"
        );
    }

    #[test]
    fn unknown_tags_are_ignored() {
        let v = parse_str("a: !foo 3", None, "t").unwrap();
        assert_eq!(v.to_json(), r#"{"a":3}"#);
    }
}
