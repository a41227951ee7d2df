//! The regex dialect of `patternProperties`: ECMA-262 patterns compiled as the validator
//! compiles them, so that the references found under a pattern are the ones it validates.

/// A compiled `patternProperties` pattern.
#[derive(Debug)]
pub(crate) struct Pattern(fancy_regex::Regex);

impl Pattern {
    /// Compiles `pattern` as the validator does.
    ///
    /// # Errors
    /// What is wrong, on one line, when the pattern is not an ECMA-262 regular expression the
    /// validator's engine supports.
    pub(crate) fn compile(pattern: &str) -> Result<Pattern, String> {
        let translated = jsonschema_regex::to_rust_regex(pattern)
            .map_err(|()| "not a supported ECMA-262 regular expression".to_string())?;
        fancy_regex::Regex::new(&translated)
            .map(Pattern)
            .map_err(|e| e.to_string().replace('\n', " "))
    }

    /// Whether `key` matches.
    pub(crate) fn is_match(&self, key: &str) -> bool {
        // An unfinished match counts: reporting one node too many beats skipping one.
        self.0.is_match(key).unwrap_or(true)
    }
}
