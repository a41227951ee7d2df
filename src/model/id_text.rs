//! A node id as a record wrote it.

use crate::cas::NodeId;
use std::fmt;

/// A node id as a record holds it: the id, where the text is one in its canonical form, or the
/// text itself (a history written by another tool may hold ids outside Crockford base32), kept
/// so that it is written back byte for byte.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum IdText {
    /// A valid id, whose canonical text is what was written.
    Id(NodeId),
    /// Text that is not an id in its canonical form.
    Text(String),
}

impl IdText {
    /// `text` as an id where it is one in canonical form, else as text.
    pub fn parse(text: impl Into<String>) -> IdText {
        let text = text.into();
        match NodeId::parse_strict(&text) {
            Some(id) if id.to_wire() == text => IdText::Id(id),
            _ => IdText::Text(text),
        }
    }

    /// The id, if the text was one.
    pub fn id(&self) -> Option<NodeId> {
        match self {
            IdText::Id(id) => Some(*id),
            IdText::Text(_) => None,
        }
    }

    /// The node the text names, reading lower case and Crockford's aliases as ids too (what
    /// garbage collection keeps).
    pub fn names(&self) -> Option<NodeId> {
        match self {
            IdText::Id(id) => Some(*id),
            IdText::Text(t) => NodeId::parse(t).ok(),
        }
    }

    /// The text as written.
    pub fn to_text(&self) -> String {
        match self {
            IdText::Id(id) => id.to_wire(),
            IdText::Text(t) => t.clone(),
        }
    }

    /// The text as written, taken.
    pub fn into_text(self) -> String {
        match self {
            IdText::Id(id) => id.to_wire(),
            IdText::Text(t) => t,
        }
    }
}

impl From<NodeId> for IdText {
    fn from(id: NodeId) -> IdText {
        IdText::Id(id)
    }
}

impl fmt::Display for IdText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IdText::Id(id) => f.write_str(&id.to_wire()),
            IdText::Text(t) => f.write_str(t),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_ids_are_ids_and_other_text_stays_text() {
        let id = NodeId(0x1234_5678);
        assert_eq!(IdText::parse(id.to_wire()), IdText::Id(id));
        for t in ["", "W", "0000000000000", "not-an-id", "0000000000OOI"] {
            let it = IdText::parse(t);
            assert_eq!(it.to_text(), t, "{t:?} is written back as it was");
            if t != "0000000000000" {
                assert_eq!(it, IdText::Text(t.to_string()), "{t:?}");
            }
        }
        // Lower case and Crockford's aliases decode, but are not the canonical text.
        let lower = id.to_wire().to_lowercase();
        assert_eq!(IdText::parse(lower.clone()), IdText::Text(lower.clone()));
        assert_eq!(IdText::parse(lower).names(), Some(id));
        assert_eq!(IdText::parse("W").names(), None);
    }
}
