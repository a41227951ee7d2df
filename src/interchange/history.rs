//! `history.jsonl`: one finished thread per line,
//! `{"thread","workflow","head","completedAt":<ms>,"reason":"completed"|"cancelled"}`.
//!
//! The writer produces exactly what `JSON.stringify` gives in that key order. The reader is as
//! tolerant as the TypeScript tool's (broken lines are skipped, a missing or unknown `reason` is
//! `completed`) but reports every skipped line with its number, and reads line by line with a
//! bound on the line length.

use crate::cas::value::{js_number_string, write_json_string};
use crate::workflow::FinishReason;
use std::io::{self, BufRead};

/// Longest line the reader accepts; a longer one is reported and skipped without being held.
pub(crate) const MAX_LINE: usize = 1 << 20;

/// One line of `history.jsonl`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryRecord {
    /// The thread id.
    pub thread: String,
    /// The workflow node id.
    pub workflow: String,
    /// The last step (head) id.
    pub head: String,
    /// When it finished, in ms since the epoch.
    pub completed_at: u64,
    /// How it finished.
    pub reason: FinishReason,
}

impl HistoryRecord {
    /// The line as `JSON.stringify` writes it, with its `\n`.
    pub fn to_line(&self) -> String {
        let mut s = String::with_capacity(128);
        s.push_str("{\"thread\":");
        write_json_string(&self.thread, &mut s);
        s.push_str(",\"workflow\":");
        write_json_string(&self.workflow, &mut s);
        s.push_str(",\"head\":");
        write_json_string(&self.head, &mut s);
        s.push_str(",\"completedAt\":");
        s.push_str(&js_number_string(self.completed_at as f64));
        s.push_str(",\"reason\":\"");
        s.push_str(self.reason.as_str());
        s.push_str("\"}\n");
        s
    }

    /// Parses one line (without its newline).
    ///
    /// # Errors
    /// A one-line reason when the line is not JSON or a field is missing or of the wrong type.
    pub(crate) fn parse_line(line: &str) -> Result<HistoryRecord, String> {
        let v: serde_json::Value =
            serde_json::from_str(line).map_err(|e| format!("broken JSON ({e})"))?;
        let obj = v.as_object().ok_or("not a JSON object")?;
        let text = |k: &str| -> Result<String, String> {
            match obj.get(k) {
                Some(serde_json::Value::String(s)) => Ok(s.clone()),
                Some(_) => Err(format!("\"{k}\" is not a string")),
                None => Err(format!("missing \"{k}\"")),
            }
        };
        let completed_at = match obj.get("completedAt") {
            Some(serde_json::Value::Number(n)) => n
                .as_u64()
                .or_else(|| {
                    n.as_f64()
                        .filter(|f| f.fract() == 0.0 && (0.0..=9_007_199_254_740_991.0).contains(f))
                        .map(|f| f as u64)
                })
                .ok_or_else(|| format!("\"completedAt\" {n} is not a time in ms"))?,
            Some(_) => return Err("\"completedAt\" is not a number".to_string()),
            None => return Err("missing \"completedAt\"".to_string()),
        };
        let reason = match obj.get("reason").and_then(|r| r.as_str()) {
            Some("cancelled") => FinishReason::Cancelled,
            _ => FinishReason::Completed,
        };
        Ok(HistoryRecord {
            thread: text("thread")?,
            workflow: text("workflow")?,
            head: text("head")?,
            completed_at,
            reason,
        })
    }
}

/// What the reader found on one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HistoryLine {
    /// A good record.
    Record {
        /// 1-based line number.
        line: u64,
        /// The record.
        record: HistoryRecord,
    },
    /// A line that was skipped.
    Skipped {
        /// 1-based line number.
        line: u64,
        /// Why, in one line.
        reason: String,
    },
}

/// Why reading `history.jsonl` stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HistoryError {
    /// The underlying reader failed.
    #[error("cannot read {path} at line {line}: {source}")]
    Io {
        /// The file (or a label).
        path: String,
        /// The line being read.
        line: u64,
        /// The I/O error.
        source: io::Error,
    },
}

/// Streams the lines of a `history.jsonl`. Blank lines are skipped silently.
pub struct HistoryReader<R> {
    input: R,
    label: String,
    line: u64,
    buf: Vec<u8>,
    done: bool,
}

impl<R: BufRead> HistoryReader<R> {
    /// Reads from `input`; `label` names it in errors.
    pub fn new(input: R, label: impl Into<String>) -> Self {
        HistoryReader {
            input,
            label: label.into(),
            line: 0,
            buf: Vec::new(),
            done: false,
        }
    }

    /// Reads one line into `buf`, keeping at most [`MAX_LINE`] bytes; returns
    /// `(bytes seen, too long)` or `None` at the end.
    fn next_raw(&mut self) -> io::Result<Option<bool>> {
        self.buf.clear();
        let mut seen = false;
        let mut too_long = false;
        loop {
            let chunk = match self.input.fill_buf() {
                Ok(c) => c,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if chunk.is_empty() {
                return Ok(seen.then_some(too_long));
            }
            seen = true;
            let (take, end) = match chunk.iter().position(|&b| b == b'\n') {
                Some(p) => (p, true),
                None => (chunk.len(), false),
            };
            if !too_long {
                if self.buf.len() + take > MAX_LINE {
                    too_long = true;
                    self.buf.clear();
                } else {
                    self.buf.extend_from_slice(&chunk[..take]);
                }
            }
            self.input.consume(take + usize::from(end));
            if end {
                return Ok(Some(too_long));
            }
        }
    }
}

impl<R: BufRead> Iterator for HistoryReader<R> {
    type Item = Result<HistoryLine, HistoryError>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.done {
            let raw = match self.next_raw() {
                Ok(r) => r,
                Err(source) => {
                    self.done = true;
                    return Some(Err(HistoryError::Io {
                        path: self.label.clone(),
                        line: self.line + 1,
                        source,
                    }));
                }
            };
            let Some(too_long) = raw else {
                self.done = true;
                break;
            };
            self.line += 1;
            let line = self.line;
            if too_long {
                return Some(Ok(HistoryLine::Skipped {
                    line,
                    reason: format!("line longer than {MAX_LINE} bytes"),
                }));
            }
            let Ok(text) = std::str::from_utf8(&self.buf) else {
                return Some(Ok(HistoryLine::Skipped {
                    line,
                    reason: "not UTF-8".to_string(),
                }));
            };
            let text = text.strip_suffix('\r').unwrap_or(text);
            if text.trim().is_empty() {
                continue;
            }
            return Some(Ok(match HistoryRecord::parse_line(text) {
                Ok(record) => HistoryLine::Record { line, record },
                Err(reason) => HistoryLine::Skipped { line, reason },
            }));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_tolerance() {
        let good = r#"{"thread":"T","workflow":"W","head":"H","completedAt":1767226751980,"reason":"completed"}"#;
        let r = HistoryRecord::parse_line(good).unwrap();
        assert_eq!(r.to_line(), format!("{good}\n"));
        let old = r#"{"thread":"T","workflow":"W","head":"H","completedAt":5}"#;
        assert_eq!(
            HistoryRecord::parse_line(old).unwrap().reason,
            FinishReason::Completed
        );
        let odd = r#"{"thread":"T","workflow":"W","head":"H","completedAt":5,"reason":"x"}"#;
        assert_eq!(
            HistoryRecord::parse_line(odd).unwrap().reason,
            FinishReason::Completed
        );
        let text = format!("{good}\n\n{{broken\n{old}");
        let lines: Vec<_> = HistoryReader::new(text.as_bytes(), "h")
            .map(Result::unwrap)
            .collect();
        assert_eq!(lines.len(), 3);
        assert!(matches!(lines[1], HistoryLine::Skipped { line: 3, .. }));
        assert!(matches!(lines[2], HistoryLine::Record { line: 4, .. }));
    }
}
