//! Mustache rendering with the semantics of mustache.js 4.2 and HTML escaping turned off.
//!
//! The TypeScript tool renders edge prompts and locations with mustache.js and an identity
//! escape, so `{{x}}` and `{{{x}}}` give the same text. This module follows mustache.js where it
//! matters for prompts: the context stack, dotted names (`a.b`, `list.length`, `list.0`), `{{.}}`,
//! sections and inverted sections, comments, set-delimiter tags, standalone-line whitespace
//! removal, and JavaScript's `String(value)` for numbers, arrays and objects. Partials render as
//! nothing (there are none). The Rust `mustache` crate always HTML-escapes `{{x}}` and formats
//! numbers its own way, hence this small implementation.

use crate::cas::Value;
use crate::cas::value::js_number_string;

/// A template that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TemplateError {
    /// A tag opened and never closed.
    #[error("unclosed tag at {0}")]
    UnclosedTag(usize),
    /// A section opened and never closed.
    #[error("unclosed section \"{name}\" at {pos}")]
    UnclosedSection {
        /// The section name.
        name: String,
        /// Byte offset.
        pos: usize,
    },
    /// A section closed that was not open.
    #[error("unopened section \"{name}\" at {pos}")]
    UnopenedSection {
        /// The section name.
        name: String,
        /// Byte offset.
        pos: usize,
    },
    /// A set-delimiter tag with bad delimiters.
    #[error("invalid tags: \"{0}\"")]
    InvalidTags(String),
}

#[derive(Debug, Clone, PartialEq)]
enum Raw {
    /// One character of text (a line's whitespace may be dropped character by character).
    Text(char),
    Name(String),
    Open {
        name: String,
        inverted: bool,
    },
    Close,
    Nothing,
}

#[derive(Debug, Clone, PartialEq)]
enum Node {
    Text(String),
    Name(String),
    Section {
        name: String,
        inverted: bool,
        children: Vec<Node>,
    },
}

/// Renders `template` with `view` as the context, HTML escaping off.
///
/// # Errors
/// [`TemplateError`] when the template does not parse.
pub(crate) fn render(template: &str, view: &Value) -> Result<String, TemplateError> {
    // Without an opening delimiter there is no tag (a change of delimiters is one): the text
    // is the output, with nothing to parse.
    if !template.contains("{{") {
        return Ok(template.to_string());
    }
    let nodes = parse(template)?;
    let mut out = String::new();
    let ctx = Context { view, parent: None };
    render_nodes(&nodes, &ctx, &mut out);
    Ok(out)
}

fn is_ws(c: char) -> bool {
    c.is_whitespace() || c == '\u{feff}'
}

// Long: one scan of the template, whose delimiters and open sections change as it goes.
fn parse(template: &str) -> Result<Vec<Node>, TemplateError> {
    let mut open_tag = "{{".to_string();
    let mut close_tag = "}}".to_string();
    let mut tokens: Vec<Raw> = Vec::new();
    let mut spaces: Vec<usize> = Vec::new();
    let mut has_tag = false;
    let mut non_space = false;
    let mut sections: Vec<String> = Vec::new();
    let mut pos = 0usize;
    let s = template;

    let strip = |tokens: &mut Vec<Raw>,
                 spaces: &mut Vec<usize>,
                 has_tag: &mut bool,
                 non_space: &mut bool| {
        if *has_tag && !*non_space {
            for i in spaces.drain(..) {
                tokens[i] = Raw::Nothing;
            }
        } else {
            spaces.clear();
        }
        *has_tag = false;
        *non_space = false;
    };

    while pos < s.len() {
        let text_end = s[pos..]
            .find(open_tag.as_str())
            .map_or(s.len(), |i| pos + i);
        for ch in s[pos..text_end].chars() {
            if is_ws(ch) {
                spaces.push(tokens.len());
            } else {
                non_space = true;
            }
            tokens.push(Raw::Text(ch));
            if ch == '\n' {
                strip(&mut tokens, &mut spaces, &mut has_tag, &mut non_space);
            }
        }
        pos = text_end;
        if pos >= s.len() {
            break;
        }
        let tag_start = pos;
        pos += open_tag.len();
        has_tag = true;
        let kind = s[pos..].chars().next().filter(|c| "#^/>{&=!".contains(*c));
        if let Some(k) = kind {
            pos += k.len_utf8();
        }
        pos = skip_ws(s, pos);
        let value;
        match kind {
            Some('=') => {
                let (v, after) = scan_until_ws_then(s, pos, "=");
                value = v.to_string();
                pos = after;
                if s[pos..].starts_with('=') {
                    pos += 1;
                }
                pos = scan_to_close(s, pos, &close_tag);
            }
            Some('{') => {
                let closing = format!("}}{close_tag}");
                let (v, after) = scan_until_ws_then(s, pos, &closing);
                value = v.to_string();
                pos = skip_ws(s, after);
                if s[pos..].starts_with('}') {
                    pos += 1;
                }
                pos = scan_to_close(s, pos, &close_tag);
            }
            _ => {
                let (v, after) = scan_until_ws_then(s, pos, &close_tag);
                value = v.to_string();
                pos = after;
            }
        }
        // Match the closing tag (`\s*` + closing delimiter).
        let p = skip_ws(s, pos);
        if !s[p..].starts_with(close_tag.as_str()) {
            return Err(TemplateError::UnclosedTag(pos));
        }
        pos = p + close_tag.len();
        match kind {
            Some('#') | Some('^') => {
                sections.push(value.clone());
                tokens.push(Raw::Open {
                    name: value,
                    inverted: kind == Some('^'),
                });
            }
            Some('/') => {
                match sections.pop() {
                    None => {
                        return Err(TemplateError::UnopenedSection {
                            name: value,
                            pos: tag_start,
                        });
                    }
                    Some(open) if open != value => {
                        return Err(TemplateError::UnclosedSection {
                            name: open,
                            pos: tag_start,
                        });
                    }
                    Some(_) => {}
                }
                tokens.push(Raw::Close);
            }
            None | Some('{') | Some('&') => {
                non_space = true;
                tokens.push(Raw::Name(value));
            }
            Some('=') => {
                let parts: Vec<&str> = value.split(is_ws).filter(|p| !p.is_empty()).collect();
                if parts.len() != 2 {
                    return Err(TemplateError::InvalidTags(value));
                }
                open_tag = parts[0].to_string();
                close_tag = parts[1].to_string();
                tokens.push(Raw::Nothing);
            }
            _ => tokens.push(Raw::Nothing), // comments and partials
        }
    }
    strip(&mut tokens, &mut spaces, &mut has_tag, &mut non_space);
    if let Some(open) = sections.pop() {
        return Err(TemplateError::UnclosedSection {
            name: open,
            pos: s.len(),
        });
    }
    Ok(nest(tokens))
}

fn skip_ws(s: &str, mut pos: usize) -> usize {
    while let Some(c) = s[pos..].chars().next() {
        if !is_ws(c) {
            break;
        }
        pos += c.len_utf8();
    }
    pos
}

/// Scans to the first position where `\s*` + `needle` matches; returns the text before it and
/// that position (or the rest of the string when there is no match).
fn scan_until_ws_then<'a>(s: &'a str, pos: usize, needle: &str) -> (&'a str, usize) {
    let mut i = pos;
    while i < s.len() {
        let p = skip_ws(s, i);
        if s[p..].starts_with(needle) {
            return (&s[pos..i], i);
        }
        i += s[i..].chars().next().map_or(1, char::len_utf8);
    }
    (&s[pos..], s.len())
}

fn scan_to_close(s: &str, pos: usize, close: &str) -> usize {
    scan_until_ws_then(s, pos, close).1
}

fn nest(tokens: Vec<Raw>) -> Vec<Node> {
    let mut stack: Vec<(String, bool, Vec<Node>)> = Vec::new();
    let mut top: Vec<Node> = Vec::new();
    for t in tokens {
        let current = match stack.last_mut() {
            Some((_, _, c)) => c,
            None => &mut top,
        };
        match t {
            Raw::Text(ch) => {
                if let Some(Node::Text(prev)) = current.last_mut() {
                    prev.push(ch);
                } else {
                    current.push(Node::Text(ch.to_string()));
                }
            }
            Raw::Name(n) => current.push(Node::Name(n)),
            Raw::Open { name, inverted } => stack.push((name, inverted, Vec::new())),
            Raw::Close => {
                let (name, inverted, children) = stack.pop().expect("sections are balanced");
                let node = Node::Section {
                    name,
                    inverted,
                    children,
                };
                match stack.last_mut() {
                    Some((_, _, c)) => c.push(node),
                    None => top.push(node),
                }
            }
            Raw::Nothing => {}
        }
    }
    top
}

struct Context<'a> {
    view: &'a Value,
    parent: Option<&'a Context<'a>>,
}

/// A looked-up value: a borrowed one, or a computed `length`.
enum Found<'a> {
    Ref(&'a Value),
    Num(f64),
}

impl Found<'_> {
    fn value(&self) -> Value {
        match self {
            Found::Ref(v) => (*v).clone(),
            Found::Num(n) => Value::Number(*n),
        }
    }
}

fn index_of(key: &str) -> Option<usize> {
    if key == "0" || (!key.starts_with('0') && key.bytes().all(|b| b.is_ascii_digit())) {
        key.parse().ok()
    } else {
        None
    }
}

/// `obj[key]` in JavaScript, for the cases that matter.
fn get<'a>(v: &Found<'a>, key: &str) -> Option<Found<'a>> {
    let Found::Ref(v) = v else { return None };
    match v {
        Value::Object(m) => m.get(key).map(Found::Ref),
        Value::Array(a) if key == "length" => Some(Found::Num(a.len() as f64)),
        Value::Array(a) => index_of(key).and_then(|i| a.get(i)).map(Found::Ref),
        Value::String(s) if key == "length" => Some(Found::Num(s.encode_utf16().count() as f64)),
        _ => None,
    }
}

/// `key in obj` for objects and arrays, or an own property of a string primitive.
fn has(v: &Found<'_>, key: &str) -> bool {
    let Found::Ref(v) = v else { return false };
    match v {
        Value::Object(m) => m.contains_key(key),
        Value::Array(a) => key == "length" || index_of(key).is_some_and(|i| i < a.len()),
        Value::String(s) => {
            key == "length" || index_of(key).is_some_and(|i| i < s.encode_utf16().count())
        }
        _ => false,
    }
}

impl<'a> Context<'a> {
    fn lookup(&self, name: &str) -> Option<Found<'a>> {
        if name == "." {
            return Some(Found::Ref(self.view));
        }
        let mut ctx = Some(self);
        while let Some(c) = ctx {
            let (hit, value) = if name.find('.').is_some_and(|i| i > 0) {
                let parts: Vec<&str> = name.split('.').collect();
                let mut cur = Some(Found::Ref(c.view));
                let mut hit = false;
                for (i, part) in parts.iter().enumerate() {
                    let Some(v) = cur.as_ref() else { break };
                    if matches!(v, Found::Ref(Value::Null)) {
                        break;
                    }
                    if i == parts.len() - 1 {
                        hit = has(v, part);
                    }
                    cur = get(v, part);
                }
                (hit, cur)
            } else {
                let v = Found::Ref(c.view);
                (has(&v, name), get(&v, name))
            };
            if hit {
                return value;
            }
            ctx = c.parent;
        }
        None
    }
}

/// JavaScript's `!value`.
fn falsy(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => true,
        Some(Value::Bool(b)) => !b,
        Some(Value::Number(n)) => *n == 0.0 || n.is_nan(),
        Some(Value::String(s)) => s.is_empty(),
        Some(_) => false,
    }
}

/// JavaScript's `String(value)`.
pub(crate) fn js_string(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => js_number_string(*n),
        Value::String(s) => s.clone(),
        Value::Array(a) => a
            .iter()
            .map(|x| match x {
                Value::Null => String::new(),
                x => js_string(x),
            })
            .collect::<Vec<_>>()
            .join(","),
        Value::Object(_) => "[object Object]".into(),
    }
}

fn render_nodes(nodes: &[Node], ctx: &Context<'_>, out: &mut String) {
    for n in nodes {
        match n {
            Node::Text(t) => out.push_str(t),
            Node::Name(name) => {
                if let Some(v) = ctx.lookup(name) {
                    let v = v.value();
                    if !matches!(v, Value::Null) {
                        out.push_str(&js_string(&v));
                    }
                }
            }
            Node::Section {
                name,
                inverted,
                children,
            } => {
                let found = ctx.lookup(name).map(|f| f.value());
                let v = found.as_ref();
                if *inverted {
                    let empty = matches!(v, Some(Value::Array(a)) if a.is_empty());
                    if falsy(v) || empty {
                        render_nodes(children, ctx, out);
                    }
                    continue;
                }
                if falsy(v) {
                    continue;
                }
                match v {
                    Some(Value::Array(items)) => {
                        for item in items {
                            let inner = Context {
                                view: item,
                                parent: Some(ctx),
                            };
                            render_nodes(children, &inner, out);
                        }
                    }
                    Some(x @ (Value::Object(_) | Value::String(_) | Value::Number(_))) => {
                        let inner = Context {
                            view: x,
                            parent: Some(ctx),
                        };
                        render_nodes(children, &inner, out);
                    }
                    _ => render_nodes(children, ctx, out),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(t: &str, view: &str) -> String {
        render(t, &Value::from_json_str(view).unwrap()).unwrap()
    }

    #[test]
    fn text_without_a_tag_is_rendered_as_the_parser_would() {
        let view = Value::from_json_str(r#"{"x":1}"#).unwrap();
        for t in [
            "again",
            "",
            "  a line\n  \n\tb }} { c } {x}\r\n",
            "\u{feff} x\n y",
        ] {
            let mut parsed = String::new();
            let ctx = Context {
                view: &view,
                parent: None,
            };
            render_nodes(&parse(t).unwrap(), &ctx, &mut parsed);
            assert_eq!(render(t, &view).unwrap(), parsed, "{t:?}");
            assert_eq!(parsed, t);
        }
    }

    #[test]
    fn variables_without_escaping() {
        let v = r#"{"x":"<a & 'b'>","n":4.5,"i":3,"t":true,"nul":null,"$status":"ready"}"#;
        assert_eq!(
            r("{{x}}|{{{x}}}|{{&x}}", v),
            "<a & 'b'>|<a & 'b'>|<a & 'b'>"
        );
        assert_eq!(
            r("{{n}} {{i}} {{t}} [{{nul}}] [{{missing}}]", v),
            "4.5 3 true [] []"
        );
        assert_eq!(r("{{ x }}", v), "<a & 'b'>");
        assert_eq!(r("/srv/review/{{{$status}}}", v), "/srv/review/ready");
        assert_eq!(
            r("Please handle: {{{userPrompt}}}", "{}"),
            "Please handle: "
        );
    }

    #[test]
    fn js_string_of_values() {
        let v = r#"{"a":[1,"x",null,[2,3]],"o":{"k":1},"big":1e21,"small":1e-7}"#;
        assert_eq!(r("{{a}}", v), "1,x,,2,3");
        assert_eq!(r("{{o}}", v), "[object Object]");
        assert_eq!(r("{{big}} {{small}}", v), "1e+21 1e-7");
    }

    #[test]
    fn dotted_names_and_context_stack() {
        let v = r#"{"a":{"b":{"c":"deep"}},"list":[10,20],"s":"héllo","name":"top","items":[{"name":"in"},{"x":1}]}"#;
        assert_eq!(r("{{a.b.c}}", v), "deep");
        assert_eq!(r("{{a.x.c}}", v), "");
        assert_eq!(r("{{list.length}} {{list.1}} {{s.length}}", v), "2 20 5");
        assert_eq!(r("{{#items}}{{name}};{{/items}}", v), "in;top;");
        assert_eq!(r("{{#a}}{{b.c}}{{/a}}", v), "deep");
    }

    #[test]
    fn sections() {
        let v =
            r#"{"t":true,"f":false,"z":0,"e":"","empty":[],"list":["a","b"],"str":"s","num":7}"#;
        assert_eq!(
            r(
                "{{#t}}yes{{/t}}{{#f}}no{{/f}}{{#z}}no{{/z}}{{#e}}no{{/e}}",
                v
            ),
            "yes"
        );
        assert_eq!(
            r(
                "{{^f}}nf{{/f}}{{^empty}}ne{{/empty}}{{^list}}no{{/list}}",
                v
            ),
            "nfne"
        );
        assert_eq!(r("{{#list}}<{{.}}>{{/list}}", v), "<a><b>");
        assert_eq!(r("{{#str}}{{.}}{{/str}} {{#num}}{{.}}{{/num}}", v), "s 7");
        assert_eq!(
            r("{{#missing}}x{{/missing}}{{^missing}}y{{/missing}}", v),
            "y"
        );
    }

    #[test]
    fn standalone_lines_and_comments() {
        let v = r#"{"list":["a","b"]}"#;
        assert_eq!(
            r("start\n  {{#list}}\n- {{.}}\n  {{/list}}\nend", v),
            "start\n- a\n- b\nend"
        );
        assert_eq!(r("a {{! note }}b", v), "a b");
        assert_eq!(r("x\n{{! standalone }}\ny", v), "x\ny");
        assert_eq!(r("{{> partial}}z", v), "z");
    }

    #[test]
    fn set_delimiters() {
        assert_eq!(r("{{=<% %>=}}<% x %> {{x}}", r#"{"x":1}"#), "1 {{x}}");
    }

    #[test]
    fn parse_errors() {
        let v = Value::Null;
        assert!(matches!(
            render("{{x", &v),
            Err(TemplateError::UnclosedTag(_))
        ));
        assert!(matches!(
            render("{{#a}}x", &v),
            Err(TemplateError::UnclosedSection { .. })
        ));
        assert!(matches!(
            render("x{{/a}}", &v),
            Err(TemplateError::UnopenedSection { .. })
        ));
        assert!(matches!(
            render("{{#a}}{{/b}}", &v),
            Err(TemplateError::UnclosedSection { .. })
        ));
    }
}
