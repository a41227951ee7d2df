//! One scalar string as the npm `yaml` package writes it: plain, single- or double-quoted, or
//! a block scalar, folded at the line width; lengths in UTF-16 code units.

use regex::Regex;
use std::sync::OnceLock;

const LINE_WIDTH: usize = 80;
const MIN_CONTENT_WIDTH: usize = 20;
const DOUBLE_QUOTED_MIN_MULTI_LINE_LENGTH: usize = 40;
/// `indentStep`: a key is stringified one step in from its map, a sequence item two columns.
pub(super) const INDENT_STEP: usize = 2;

pub(super) type U = Vec<u16>;

pub(super) fn u(s: &str) -> U {
    s.encode_utf16().collect()
}

pub(super) const NL: u16 = b'\n' as u16;
pub(super) const SP: u16 = b' ' as u16;
const TAB: u16 = b'\t' as u16;

#[derive(Clone, Copy)]
pub(super) struct Ctx {
    pub implicit_key: bool,
    pub indent_at_start: Option<usize>,
    /// `ctx.indent`, in spaces.
    pub indent: usize,
}

pub(super) fn spaces(n: usize) -> U {
    vec![SP; n]
}

pub(super) fn stringify_string(value: &str, ctx: Ctx) -> U {
    // Control characters force double quotes (unpaired surrogates cannot occur in a `str`).
    let forced = value
        .chars()
        .any(|c| matches!(c as u32, 0x00..=0x08 | 0x0b..=0x1f | 0x7f..=0x9f));
    if forced {
        double_quoted(value, ctx)
    } else {
        plain(value, ctx)
    }
}

/// Whether a plain scalar would read back as something else than this string
/// (the core schema's non-string tags, plus the block-map syntax checks of `plainString`).
fn plain_forbidden(v: &str) -> bool {
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = RE.get_or_init(|| {
        Regex::new(
            r#"^[\n\t ,\[\]{}#&*!|>'"%@`]|^[?-]$|^[?-][ \t]|[\n:][ \t]|[ \t]\n|[\n\t ]#|[\n\t :]$"#,
        )
        .expect("valid regex")
    });
    re.is_match(v)
}

pub(super) fn core_non_string(v: &str) -> bool {
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = RE.get_or_init(|| {
        Regex::new(concat!(
            r"^(?:~|[Nn]ull|NULL)?$",
            r"|^(?:[Tt]rue|TRUE|[Ff]alse|FALSE)$",
            r"|^0o[0-7]+$",
            r"|^[-+]?[0-9]+$",
            r"|^0x[0-9a-fA-F]+$",
            r"|^(?:[-+]?\.(?:inf|Inf|INF)|\.nan|\.NaN|\.NAN)$",
            r"|^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)[eE][-+]?[0-9]+$",
            r"|^[-+]?(?:\.[0-9]+|[0-9]+\.[0-9]*)$",
        ))
        .expect("valid regex")
    });
    re.is_match(v)
}

/// JavaScript line terminators, where `^` matches under the `m` flag and `.` stops.
fn is_js_line_terminator(c: u16) -> bool {
    matches!(c, 0x0a | 0x0d | 0x2028 | 0x2029)
}

/// `/^(%|---|\.\.\.)/m`.
fn contains_document_marker(v: &[u16]) -> bool {
    let at = |i: usize| {
        let rest = &v[i..];
        rest.first() == Some(&(b'%' as u16))
            || rest.starts_with(&u("---"))
            || rest.starts_with(&u("..."))
    };
    (0..v.len()).any(|i| (i == 0 || is_js_line_terminator(v[i - 1])) && at(i))
}

fn plain(value: &str, ctx: Ctx) -> U {
    let has_nl = value.contains('\n');
    if ctx.implicit_key && has_nl {
        return quoted(value, ctx);
    }
    if plain_forbidden(value) {
        return if ctx.implicit_key || !has_nl {
            quoted(value, ctx)
        } else {
            block(value, ctx, false)
        };
    }
    if !ctx.implicit_key && has_nl {
        return block(value, ctx, false);
    }
    let s = u(value);
    if contains_document_marker(&s) {
        if ctx.indent == 0 {
            return block(value, ctx, true);
        } else if ctx.implicit_key && ctx.indent == INDENT_STEP {
            // the keys of a root map
            return quoted(value, ctx);
        }
    }
    if core_non_string(value) {
        return quoted(value, ctx);
    }
    if ctx.implicit_key {
        s
    } else {
        fold(&s, Mode::Flow, ctx.indent_at_start, ctx.indent).0
    }
}

fn quoted(value: &str, ctx: Ctx) -> U {
    let has_double = value.contains('"');
    let has_single = value.contains('\'');
    if has_double && !has_single {
        single_quoted(value, ctx)
    } else {
        double_quoted(value, ctx)
    }
}

fn single_quoted(value: &str, ctx: Ctx) -> U {
    let v = u(value);
    let ws_around_nl = v.windows(2).any(|w| {
        (matches!(w[0], SP | TAB) && w[1] == NL) || (w[0] == NL && matches!(w[1], SP | TAB))
    });
    if (ctx.implicit_key && value.contains('\n')) || ws_around_nl {
        return double_quoted(value, ctx);
    }
    let indent = quoted_indent(value, ctx);
    let mut res: U = vec![b'\'' as u16];
    let mut i = 0;
    while i < v.len() {
        let c = v[i];
        if c == b'\'' as u16 {
            res.extend([c, c]);
            i += 1;
        } else if c == NL {
            // `/\n+/g` → `$&\n` + indent
            while i < v.len() && v[i] == NL {
                res.push(NL);
                i += 1;
            }
            res.push(NL);
            res.extend(spaces(indent));
        } else {
            res.push(c);
            i += 1;
        }
    }
    res.push(b'\'' as u16);
    if ctx.implicit_key {
        res
    } else {
        fold(&res, Mode::Flow, ctx.indent_at_start, indent).0
    }
}

/// `JSON.stringify` of a string.
fn json_string(value: &str) -> U {
    let mut s = String::with_capacity(value.len() + 2);
    s.push('"');
    for c in value.chars() {
        match c {
            '"' => s.push_str("\\\""),
            '\\' => s.push_str("\\\\"),
            '\u{8}' => s.push_str("\\b"),
            '\u{c}' => s.push_str("\\f"),
            '\n' => s.push_str("\\n"),
            '\r' => s.push_str("\\r"),
            '\t' => s.push_str("\\t"),
            c if (c as u32) < 0x20 => s.push_str(&format!("\\u{:04x}", c as u32)),
            c => s.push(c),
        }
    }
    s.push('"');
    u(&s)
}

/// The indentation of a quoted scalar's continuation lines: `ctx.indent`, or a step at the
/// root when a line could be read as a document marker.
fn quoted_indent(value: &str, ctx: Ctx) -> usize {
    if ctx.indent == 0 && contains_document_marker(&u(value)) {
        INDENT_STEP
    } else {
        ctx.indent
    }
}

fn double_quoted(value: &str, ctx: Ctx) -> U {
    let indent = quoted_indent(value, ctx);
    let json = json_string(value);
    let at = |i: usize| json.get(i).copied();
    let bs = b'\\' as u16;
    let mut out: U = Vec::with_capacity(json.len());
    let mut start = 0usize;
    let mut i = 0usize;
    while i < json.len() {
        let mut ch = json[i];
        if ch == SP && at(i + 1) == Some(bs) && at(i + 2) == Some(b'n' as u16) {
            // a space before a newline is escaped so that folding keeps it
            out.extend(&json[start..i]);
            out.extend(u("\\ "));
            i += 1;
            start = i;
            ch = bs;
        }
        if ch == bs {
            match at(i + 1).map(|c| c as u8 as char) {
                Some('u') => {
                    out.extend(&json[start..i]);
                    let code = String::from_utf16_lossy(&json[i + 2..i + 6]);
                    match code.as_str() {
                        "0000" => out.extend(u("\\0")),
                        "0007" => out.extend(u("\\a")),
                        "000b" => out.extend(u("\\v")),
                        "001b" => out.extend(u("\\e")),
                        "0085" => out.extend(u("\\N")),
                        "00a0" => out.extend(u("\\_")),
                        "2028" => out.extend(u("\\L")),
                        "2029" => out.extend(u("\\P")),
                        c if c.starts_with("00") => {
                            out.extend(u("\\x"));
                            out.extend(u(&c[2..]));
                        }
                        _ => out.extend(&json[i..i + 6]),
                    }
                    i += 5;
                    start = i + 1;
                }
                Some('n') => {
                    if ctx.implicit_key
                        || at(i + 2) == Some(b'"' as u16)
                        || json.len() < DOUBLE_QUOTED_MIN_MULTI_LINE_LENGTH
                    {
                        i += 1;
                    } else {
                        // folding eats the first newline
                        out.extend(&json[start..i]);
                        out.extend([NL, NL]);
                        while at(i + 2) == Some(bs)
                            && at(i + 3) == Some(b'n' as u16)
                            && at(i + 4) != Some(b'"' as u16)
                        {
                            out.push(NL);
                            i += 2;
                        }
                        out.extend(spaces(indent));
                        // a space after a newline is escaped so that folding keeps it
                        if at(i + 2) == Some(SP) {
                            out.push(bs);
                        }
                        i += 1;
                        start = i + 1;
                    }
                }
                _ => i += 1,
            }
        }
        i += 1;
    }
    let s = if start > 0 {
        out.extend(&json[start..]);
        out
    } else {
        json
    };
    if ctx.implicit_key {
        s
    } else {
        fold(&s, Mode::Quoted, ctx.indent_at_start, indent).0
    }
}

/// `lineLengthOverLimit(str, 80, indent)`.
fn line_length_over_limit(s: &[u16], indent: usize) -> bool {
    let limit = LINE_WIDTH.saturating_sub(indent);
    let n = s.len();
    if n <= limit {
        return false;
    }
    let mut start = 0;
    for (i, &c) in s.iter().enumerate() {
        if c == NL {
            if i - start > limit {
                return true;
            }
            start = i + 1;
            if n - start <= limit {
                return false;
            }
        }
    }
    true
}

/// Appends `text` with every run of newlines followed by `indent` spaces.
fn indent_after_newline_runs(text: &[u16], out: &mut U, indent: usize) {
    let mut i = 0;
    while i < text.len() {
        if text[i] == NL {
            while i < text.len() && text[i] == NL {
                out.push(NL);
                i += 1;
            }
            out.extend(spaces(indent));
        } else {
            out.push(text[i]);
            i += 1;
        }
    }
}

/// A multi-line value as a literal (`|`) or folded (`>`) block scalar; `force_indent` indents a
/// root scalar a step (it has a line that could be read as a document marker).
fn block(value: &str, ctx: Ctx, force_indent: bool) -> U {
    let v = u(value);
    let indent = if ctx.indent > 0 {
        ctx.indent
    } else if force_indent || contains_document_marker(&v) {
        INDENT_STEP
    } else {
        0
    };
    // `/\n[\t ]+$/`: a block cannot end in whitespace after the last line break
    {
        let trail = v.iter().rev().take_while(|&&c| c == SP || c == TAB).count();
        if trail > 0 && v.len() > trail && v[v.len() - trail - 1] == NL {
            return quoted(value, ctx);
        }
    }
    let literal = !line_length_over_limit(&v, indent);
    if v.is_empty() {
        return u(if literal { "|\n" } else { ">\n" });
    }
    // chomping from the whitespace at the end
    let mut end_start = v.len();
    while end_start > 0 && matches!(v[end_start - 1], NL | TAB | SP) {
        end_start -= 1;
    }
    let mut end: U = v[end_start..].to_vec();
    let end_nl = end.iter().position(|&c| c == NL);
    let chomp = match end_nl {
        None => "-",
        Some(p) if end_start == 0 || p != end.len() - 1 => "+",
        Some(_) => "",
    };
    let mut body: U = v[..end_start].to_vec();
    if !end.is_empty() {
        if end.last() == Some(&NL) {
            end.pop();
        }
        end = indent_inner_newline_runs(&end, indent);
    }
    // indentation indicator from the whitespace at the start
    let mut start_with_space = false;
    let mut start_end = 0;
    let mut start_nl: isize = -1;
    while start_end < body.len() {
        match body[start_end] {
            SP => start_with_space = true,
            NL => start_nl = start_end as isize,
            _ => break,
        }
        start_end += 1;
    }
    let start_len = if start_nl < start_end as isize {
        (start_nl + 1) as usize
    } else {
        start_end
    };
    let mut start: U = Vec::new();
    if start_len > 0 {
        indent_after_newline_runs(&body[..start_len], &mut start, indent);
        body.drain(..start_len);
    }
    let mut header = String::new();
    if start_with_space {
        header.push(if indent > 0 { '2' } else { '1' });
    }
    header.push_str(chomp);
    if !literal {
        let mut text = start.clone();
        text.extend(folded_value(&body, indent));
        text.extend(&end);
        let (folded, overflow) = fold(&text, Mode::Block, Some(ctx.indent), indent);
        if !overflow {
            let mut out = u(&format!(">{header}\n"));
            out.extend(spaces(indent));
            out.extend(folded);
            return out;
        }
    }
    let mut out = u(&format!("|{header}\n"));
    out.extend(spaces(indent));
    out.extend(start);
    indent_after_newline_runs(&body, &mut out, indent);
    out.extend(end);
    out
}

/// `/(^|(?<!\n))\n+(?!\n|$)/g` → `$&` + indent: `end` with each run of newlines not at its end
/// followed by the indentation.
fn indent_inner_newline_runs(end: &[u16], indent: usize) -> U {
    let mut e2 = U::new();
    let mut i = 0;
    while i < end.len() {
        if end[i] == NL {
            let s = i;
            while i < end.len() && end[i] == NL {
                i += 1;
            }
            e2.extend(&end[s..i]);
            if i < end.len() {
                e2.extend(spaces(indent));
            }
        } else {
            e2.push(end[i]);
            i += 1;
        }
    }
    e2
}

/// The three replacements of `blockString` that prepare a folded block body.
fn folded_value(value: &[u16], indent: usize) -> U {
    // 1. `/\n+/g` → `\n$&`
    let mut a = U::new();
    let mut i = 0;
    while i < value.len() {
        if value[i] == NL {
            a.push(NL);
            while i < value.len() && value[i] == NL {
                a.push(NL);
                i += 1;
            }
        } else {
            a.push(value[i]);
            i += 1;
        }
    }
    // 2. `/(?:^|\n)([\t ].*)(?:([\n\t ]*)\n(?![\n\t ]))?/g` → `$1$2`:
    //    more-indented lines are not folded
    let ws = |c: u16| c == SP || c == TAB;
    let ws_nl = |c: u16| c == SP || c == TAB || c == NL;
    let mut b = U::new();
    let mut i = 0;
    while i < a.len() {
        let g1 = if i == 0 && ws(a[0]) {
            Some(0)
        } else if a[i] == NL && a.get(i + 1).copied().is_some_and(ws) {
            Some(i + 1)
        } else {
            None
        };
        let Some(g1_start) = g1 else {
            b.push(a[i]);
            i += 1;
            continue;
        };
        let mut q = g1_start + 1;
        while q < a.len() && !is_js_line_terminator(a[q]) {
            q += 1;
        }
        b.extend(&a[g1_start..q]);
        let mut r = q;
        while r < a.len() && ws_nl(a[r]) {
            r += 1;
        }
        if r > q && a[r - 1] == NL {
            b.extend(&a[q..r - 1]);
            i = r;
        } else {
            i = q;
        }
    }
    // 3. `/\n+/g` → `$&` + indent
    let mut c = U::new();
    indent_after_newline_runs(&b, &mut c, indent);
    c
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Flow,
    Block,
    Quoted,
}

/// `foldFlowLines(text, "  ", mode, {indentAtStart, lineWidth: 80, minContentWidth: 20})`;
/// returns the text and whether a line overflowed.
// Long: a port of the yaml library's `foldFlowLines`, kept in its order to compare the two.
fn fold(text: &[u16], mode: Mode, indent_at_start: Option<usize>, indent: usize) -> (U, bool) {
    let indent = &spaces(indent)[..];
    let end_step =
        (1 + MIN_CONTENT_WIDTH as isize).max(1 + LINE_WIDTH as isize - indent.len() as isize);
    if text.len() as isize <= end_step {
        return (text.to_vec(), false);
    }
    let at = |i: isize| -> Option<u16> {
        if i < 0 {
            None
        } else {
            text.get(i as usize).copied()
        }
    };
    let mut folds: Vec<isize> = Vec::new();
    let mut escaped_folds: Vec<isize> = Vec::new();
    let mut end = LINE_WIDTH as isize - indent.len() as isize;
    if let Some(ias) = indent_at_start {
        if ias as isize > LINE_WIDTH as isize - 2.max(MIN_CONTENT_WIDTH) as isize {
            folds.push(0);
        } else {
            end = LINE_WIDTH as isize - ias as isize;
        }
    }
    let mut split: Option<isize> = None;
    let mut prev: Option<u16> = None;
    let mut overflow = false;
    let mut i: isize = -1;
    let mut esc_start: isize = -1;
    let mut esc_end: isize = -1;
    if mode == Mode::Block {
        i = consume_more_indented_lines(text, i, indent.len() as isize);
        if i != -1 {
            end = i + end_step;
        }
    }
    loop {
        i += 1;
        let Some(c0) = at(i) else {
            break;
        };
        let mut ch = Some(c0);
        if mode == Mode::Quoted && ch == Some(b'\\' as u16) {
            esc_start = i;
            i += match at(i + 1) {
                Some(0x78) => 3, // x
                Some(0x75) => 5, // u
                Some(0x55) => 9, // U
                _ => 1,
            };
            esc_end = i;
        }
        if ch == Some(NL) {
            if mode == Mode::Block {
                i = consume_more_indented_lines(text, i, indent.len() as isize);
            }
            end = i + indent.len() as isize + end_step;
            split = None;
        } else {
            if ch == Some(SP) && prev.is_some_and(|p| p != SP && p != NL && p != TAB) {
                // a space between non-spaces can become a line break
                let next = at(i + 1);
                if next.is_some_and(|n| n != SP && n != NL && n != TAB) {
                    split = Some(i);
                }
            }
            if i >= end {
                if let Some(sp) = split {
                    folds.push(sp);
                    end = sp + end_step;
                    split = None;
                } else if mode == Mode::Quoted {
                    // whitespace collected at the end may stretch past the line width
                    while prev == Some(SP) || prev == Some(TAB) {
                        prev = ch;
                        i += 1;
                        ch = at(i);
                        overflow = true;
                    }
                    // account for the newline escape without breaking an escape before it
                    let j = if i > esc_end + 1 {
                        i - 2
                    } else {
                        esc_start - 1
                    };
                    if escaped_folds.contains(&j) {
                        return (text.to_vec(), overflow);
                    }
                    folds.push(j);
                    escaped_folds.push(j);
                    end = j + end_step;
                    split = None;
                } else {
                    overflow = true;
                }
            }
        }
        prev = ch;
    }
    if folds.is_empty() {
        return (text.to_vec(), overflow);
    }
    let slice = |a: isize, b: isize| &text[a.max(0) as usize..(b.max(0) as usize).min(text.len())];
    let mut res: U = slice(0, folds[0]).to_vec();
    for (k, &f) in folds.iter().enumerate() {
        let e = match folds.get(k + 1) {
            Some(&n) if n != 0 => n,
            _ => text.len() as isize,
        };
        if f == 0 {
            res = vec![NL];
            res.extend(indent);
            res.extend(slice(0, e));
        } else {
            if mode == Mode::Quoted && escaped_folds.contains(&f) {
                if let Some(c) = at(f) {
                    res.push(c);
                }
                res.push(b'\\' as u16);
            }
            res.push(NL);
            res.extend(indent);
            res.extend(slice(f + 1, e));
        }
    }
    (res, overflow)
}

/// Presumes `i + 1` starts a line; returns the index of the last newline of a more-indented
/// block (`consumeMoreIndentedLines`).
fn consume_more_indented_lines(text: &[u16], mut i: isize, indent: isize) -> isize {
    let at = |i: isize| -> Option<u16> {
        if i < 0 {
            None
        } else {
            text.get(i as usize).copied()
        }
    };
    let mut end = i;
    let mut start = i + 1;
    let mut ch = at(start);
    while ch == Some(SP) || ch == Some(TAB) {
        if i < start + indent {
            i += 1;
            ch = at(i);
        } else {
            loop {
                i += 1;
                ch = at(i);
                if ch.is_none() || ch == Some(NL) {
                    break;
                }
            }
            end = i;
            start = i + 1;
            ch = at(start);
        }
    }
    end
}
