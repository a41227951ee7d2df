//! No cycle of imports between the crate's source files.
//!
//! Every `src/**/*.rs` of the library is read as text: comments and literals are dropped, then
//! each path that names the crate (`crate::…`, `super::…`, `self::…`, a child module, or a name a
//! `use` brought in) is followed to the file that defines what it names, through `pub use`
//! re-exports. A `mod` declaration is no arrow (a parent declaring its child is not a use of it).
//! The arrows between files must form no cycle.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

/// Cycles known and not broken yet, each group of files with its reason. The check fails on
/// any other cycle, and on one of these once it is gone, so that its entry goes too.
const KNOWN: &[(&[&str], &str)] = &[];

/// Files (paths relative to the crate root, with `/`) and the files each one imports.
type Graph = BTreeMap<String, BTreeSet<String>>;

#[test]
fn source_files_import_one_way() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    collect(&root.join("src"), root, &mut files);
    let graph = file_graph(&files);
    let mut found = cycles(&graph);
    for (group, why) in KNOWN {
        let at = found.iter().position(|(g, _)| g == group);
        assert!(
            at.is_some(),
            "no cycle through {group:?} any more: drop it from KNOWN ({why})"
        );
        found.remove(at.unwrap());
    }
    assert!(
        found.is_empty(),
        "source files import each other in a circle:\n{}",
        found
            .iter()
            .map(|(group, one)| format!(
                "  {} files: {}\n    for one: {}\n{}",
                group.len(),
                group.join(", "),
                one.join(" -> "),
                group
                    .iter()
                    .flat_map(|a| graph[a]
                        .iter()
                        .filter(|b| group.contains(b))
                        .map(move |b| { format!("    {a} -> {b}\n") }))
                    .collect::<String>()
            ))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn a_cycle_is_found_and_shown() {
    let one = |g: &Graph| cycles(g).into_iter().map(|(_, c)| c).collect::<Vec<_>>();
    let g = graph(&[("a", "b"), ("b", "c"), ("c", "a"), ("c", "d"), ("d", "e")]);
    assert_eq!(one(&g), vec![vec!["a", "b", "c", "a"]]);
    assert_eq!(cycles(&g)[0].0, ["a", "b", "c"]);
    let g = graph(&[("a", "b"), ("b", "c"), ("a", "c"), ("x", "y"), ("y", "x")]);
    assert_eq!(one(&g), vec![vec!["x", "y", "x"]]);
    let g = graph(&[("a", "b"), ("b", "a"), ("b", "c"), ("c", "d"), ("d", "b")]);
    assert_eq!(one(&g), vec![vec!["a", "b", "a"]]);
    assert_eq!(cycles(&g)[0].0, ["a", "b", "c", "d"]);
    assert!(cycles(&graph(&[("a", "b"), ("b", "c"), ("a", "c")])).is_empty());
}

#[test]
fn imports_are_followed_to_the_defining_file() {
    let files = [
        ("src/lib.rs", "pub mod a;\nmod b;\n"),
        (
            "src/a/mod.rs",
            "mod x;\nmod y;\npub use x::Thing;\npub(crate) use y::{lend as lent};\n\
             pub enum Error {}\n",
        ),
        // `super::Error` is a.rs itself; `Thing` comes through a.rs's re-export.
        (
            "src/a/x.rs",
            "use super::Error;\npub struct Thing;\n// crate::b::nothing\n\
             fn f() -> &'static str { \"crate::b::Other\" }\n",
        ),
        ("src/a/y.rs", "pub fn lend() { crate::b::go(); }\n"),
        (
            "src/b.rs",
            "use crate::a::{self, lent};\npub fn go() { let _ = a::Thing; }\n\
             #[cfg(test)]\nmod tests {\n    use super::*;\n}\n",
        ),
    ];
    let files: Vec<(String, String)> = files
        .iter()
        .map(|(p, t)| (p.to_string(), t.to_string()))
        .collect();
    let g = file_graph(&files);
    let arrows = |f: &str| g[f].iter().map(String::as_str).collect::<Vec<_>>();
    // a/mod.rs re-exports `Thing` and `lent` without using them: no arrow.
    assert!(arrows("src/a/mod.rs").is_empty());
    assert_eq!(arrows("src/a/x.rs"), ["src/a/mod.rs"]);
    assert_eq!(arrows("src/a/y.rs"), ["src/b.rs"]);
    // `a::Thing` and `lent` are followed through a/mod.rs's re-exports.
    assert_eq!(
        arrows("src/b.rs"),
        ["src/a/mod.rs", "src/a/x.rs", "src/a/y.rs"]
    );
    assert_eq!(
        cycles(&g),
        vec![(
            vec!["src/a/y.rs".to_string(), "src/b.rs".to_string()],
            vec![
                "src/a/y.rs".to_string(),
                "src/b.rs".to_string(),
                "src/a/y.rs".to_string()
            ]
        )]
    );
}

fn graph(arrows: &[(&str, &str)]) -> Graph {
    let mut g = Graph::new();
    for (a, b) in arrows {
        g.entry(a.to_string()).or_default().insert(b.to_string());
        g.entry(b.to_string()).or_default();
    }
    g
}

/// The library's source files under `dir` (not `main.rs`, the binary's crate).
fn collect(dir: &Path, root: &Path, out: &mut Vec<(String, String)>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            collect(&p, root, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            let rel = p
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            if rel != "src/main.rs" {
                out.push((rel, std::fs::read_to_string(&p).unwrap()));
            }
        }
    }
}

/// Each group of files that reach each other, with the shortest cycle through its first file
/// as `[a, b, …, a]`.
fn cycles(g: &Graph) -> Vec<(Vec<String>, Vec<String>)> {
    let mut out = Vec::new();
    for scc in strongly_connected(g) {
        if scc.len() < 2 {
            continue;
        }
        let start = &scc[0];
        let inside: BTreeSet<&String> = scc.iter().collect();
        // Breadth first from `start` back to it, inside the group.
        let mut prev: HashMap<&String, &String> = HashMap::new();
        let mut queue = std::collections::VecDeque::from([start]);
        let mut end = None;
        while let Some(n) = queue.pop_front() {
            for m in &g[n] {
                if !inside.contains(m) {
                    continue;
                }
                if m == start {
                    end = Some(n);
                    break;
                }
                if !prev.contains_key(m) {
                    prev.insert(m, n);
                    queue.push_back(m);
                }
            }
            if end.is_some() {
                break;
            }
        }
        let mut n = end.expect("a group of two or more files has a cycle through each");
        let mut path = vec![start.clone()];
        while n != start {
            path.push(n.clone());
            n = prev[n];
        }
        path.push(start.clone());
        path.reverse();
        out.push((scc, path));
    }
    out
}

/// Tarjan's strongly connected components, each sorted, in the order of their first file.
fn strongly_connected(g: &Graph) -> Vec<Vec<String>> {
    struct State<'g> {
        g: &'g Graph,
        index: HashMap<&'g String, usize>,
        low: HashMap<&'g String, usize>,
        stack: Vec<&'g String>,
        on_stack: BTreeSet<&'g String>,
        out: Vec<Vec<String>>,
    }
    fn visit<'g>(s: &mut State<'g>, v: &'g String) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in &s.g[v] {
            if !s.index.contains_key(w) {
                visit(s, w);
                let l = s.low[v].min(s.low[w]);
                s.low.insert(v, l);
            } else if s.on_stack.contains(w) {
                let l = s.low[v].min(s.index[w]);
                s.low.insert(v, l);
            }
        }
        if s.low[v] == s.index[v] {
            let mut scc = Vec::new();
            loop {
                let w = s.stack.pop().unwrap();
                s.on_stack.remove(w);
                scc.push(w.clone());
                if w == v {
                    break;
                }
            }
            scc.sort();
            s.out.push(scc);
        }
    }
    let mut s = State {
        g,
        index: HashMap::new(),
        low: HashMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in g.keys() {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.out.sort();
    s.out
}

/// A token of Rust source, comments and literals dropped.
#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    /// `::`
    Path,
    Punct(char),
}

fn tokens(src: &str) -> Vec<Tok> {
    let c: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let ident_start = |ch: char| ch == '_' || ch.is_alphabetic();
    while i < c.len() {
        let ch = c[i];
        if ch.is_whitespace() {
            i += 1;
        } else if ch == '/' && c.get(i + 1) == Some(&'/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && c.get(i + 1) == Some(&'*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if (ch == 'r' || ch == 'b')
            && let Some(end) = raw_string_end(&c, i)
        {
            i = end;
        } else if ch == '"' || (ch == 'b' && c.get(i + 1) == Some(&'"')) {
            i += if ch == 'b' { 2 } else { 1 };
            while i < c.len() && c[i] != '"' {
                i += if c[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
        } else if ch == '\'' {
            // A char literal ('x', '\n', '\u{..}') or a lifetime ('a).
            if c.get(i + 1) == Some(&'\\') {
                i += 2;
                while i < c.len() && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if c.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                i += 1;
                while i < c.len() && (c[i] == '_' || c[i].is_alphanumeric()) {
                    i += 1;
                }
            }
        } else if ident_start(ch) {
            let s = i;
            while i < c.len() && (c[i] == '_' || c[i].is_alphanumeric()) {
                i += 1;
            }
            let word: String = c[s..i].iter().collect();
            // `r#ident`
            if word == "r" && c.get(i) == Some(&'#') {
                i += 1;
                continue;
            }
            out.push(Tok::Ident(word));
        } else if ch.is_ascii_digit() {
            while i < c.len() && (c[i] == '_' || c[i] == '.' || c[i].is_alphanumeric()) {
                if c[i] == '.' && c.get(i + 1) == Some(&'.') {
                    break;
                }
                i += 1;
            }
        } else if ch == ':' && c.get(i + 1) == Some(&':') {
            out.push(Tok::Path);
            i += 2;
        } else {
            out.push(Tok::Punct(ch));
            i += 1;
        }
    }
    out
}

/// Where a raw (byte) string literal starting at `i` ends, if one starts there.
fn raw_string_end(c: &[char], i: usize) -> Option<usize> {
    let mut j = i;
    if c[j] == 'b' {
        j += 1;
    }
    if c.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let mut hashes = 0;
    while c.get(j) == Some(&'#') {
        hashes += 1;
        j += 1;
    }
    if c.get(j) != Some(&'"') {
        return None;
    }
    j += 1;
    while j < c.len() {
        if c[j] == '"' && (1..=hashes).all(|k| c.get(j + k) == Some(&'#')) {
            return Some(j + 1 + hashes);
        }
        j += 1;
    }
    Some(j)
}

/// A module path from the crate root.
type ModPath = Vec<String>;

/// What one file says: its child modules, the names it defines, its `use` items and the other
/// paths it names, each with the inline module it stands in.
#[derive(Default)]
struct FileFacts {
    children: BTreeSet<String>,
    defines: BTreeSet<String>,
    /// (public, inline module, segments as written, the name it is known by).
    uses: Vec<(bool, Vec<String>, Vec<String>, String)>,
    /// (inline module, segments as written).
    paths: Vec<(Vec<String>, Vec<String>)>,
    /// Every identifier outside `use` items: whether a re-exported name is also used here.
    words: BTreeSet<String>,
}

const ITEM_KEYWORDS: [&str; 9] = [
    "fn",
    "struct",
    "enum",
    "trait",
    "type",
    "const",
    "static",
    "union",
    "macro_rules",
];

fn facts(src: &str) -> FileFacts {
    let t = tokens(src);
    let mut f = FileFacts::default();
    let ident = |k: usize| match t.get(k) {
        Some(Tok::Ident(s)) => Some(s.as_str()),
        _ => None,
    };
    // Inline modules open at a brace depth.
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < t.len() {
        match &t[i] {
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => {
                depth = depth.saturating_sub(1);
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
            }
            Tok::Ident(w) if w == "mod" => {
                if let Some(name) = ident(i + 1) {
                    match t.get(i + 2) {
                        Some(Tok::Punct(';')) => {
                            if inline.is_empty() {
                                f.children.insert(name.to_string());
                            }
                            i += 3;
                            continue;
                        }
                        Some(Tok::Punct('{')) => {
                            inline.push((name.to_string(), depth));
                            depth += 1;
                            i += 3;
                            continue;
                        }
                        _ => {}
                    }
                }
            }
            Tok::Ident(w) if ITEM_KEYWORDS.contains(&w.as_str()) => {
                let mut k = i + 1;
                if w == "macro_rules" && t.get(k) == Some(&Tok::Punct('!')) {
                    k += 1;
                }
                if let Some(name) = ident(k)
                    && inline.is_empty()
                    && t.get(i.wrapping_sub(1)) != Some(&Tok::Path)
                {
                    f.defines.insert(name.to_string());
                }
            }
            Tok::Ident(w) if w == "use" => {
                let public = matches!(t.get(i.wrapping_sub(1)), Some(Tok::Ident(p)) if p == "pub")
                    || matches!(t.get(i.wrapping_sub(1)), Some(Tok::Punct(')')))
                        && (i >= 4)
                        && t[i.saturating_sub(5)..i].contains(&Tok::Ident("pub".into()));
                let end = (i..t.len())
                    .find(|&k| t[k] == Tok::Punct(';'))
                    .unwrap_or(t.len());
                let mut trees = Vec::new();
                use_tree(&t[i + 1..end], Vec::new(), &mut trees);
                let here: Vec<String> = inline.iter().map(|(n, _)| n.clone()).collect();
                for (path, name) in trees {
                    f.uses.push((public, here.clone(), path, name));
                }
                i = end + 1;
                continue;
            }
            Tok::Ident(w)
                if t.get(i + 1) == Some(&Tok::Path)
                    && t.get(i.wrapping_sub(1)) != Some(&Tok::Path) =>
            {
                f.words.insert(w.clone());
                let mut path = vec![w.clone()];
                let mut k = i + 1;
                while t.get(k) == Some(&Tok::Path)
                    && let Some(Tok::Ident(s)) = t.get(k + 1)
                {
                    path.push(s.clone());
                    k += 2;
                }
                let here: Vec<String> = inline.iter().map(|(n, _)| n.clone()).collect();
                f.paths.push((here, path));
                i = k;
                continue;
            }
            // A name used here, not a field, method or variant named after a path.
            Tok::Ident(w)
                if !matches!(t.get(i.wrapping_sub(1)), Some(Tok::Path | Tok::Punct('.'))) =>
            {
                f.words.insert(w.clone());
            }
            _ => {}
        }
        i += 1;
    }
    f
}

/// Expands a use tree (`a::{b, c::d as e, f::*}`) into (segments, the name each is known by).
fn use_tree(t: &[Tok], prefix: Vec<String>, out: &mut Vec<(Vec<String>, String)>) {
    let mut path = prefix;
    let mut i = 0;
    while i < t.len() {
        match &t[i] {
            Tok::Ident(s) if s == "as" => {
                if path.last().is_some_and(|s| s == "self") {
                    path.pop();
                }
                if let Some(Tok::Ident(alias)) = t.get(i + 1) {
                    out.push((path, alias.clone()));
                }
                return;
            }
            Tok::Ident(s) => path.push(s.clone()),
            Tok::Punct('*') => {
                out.push((path, "*".into()));
                return;
            }
            Tok::Punct('{') => {
                // Each tree of the group, split at its own commas.
                let mut depth = 0;
                let mut start = i + 1;
                for k in i + 1..t.len() {
                    match t[k] {
                        Tok::Punct('{') => depth += 1,
                        Tok::Punct('}') if depth > 0 => depth -= 1,
                        Tok::Punct(',' | '}') if depth == 0 => {
                            if start < k {
                                use_tree(&t[start..k], path.clone(), out);
                            }
                            start = k + 1;
                        }
                        _ => {}
                    }
                }
                return;
            }
            _ => {}
        }
        i += 1;
    }
    if path.last().is_some_and(|s| s == "self") {
        path.pop();
    }
    if let Some(name) = path.last().cloned() {
        out.push((path, name));
    }
}

/// The file graph of `files` (path relative to the crate root, text).
fn file_graph(files: &[(String, String)]) -> Graph {
    // Module path -> file.
    let mut module_file: BTreeMap<ModPath, String> = BTreeMap::new();
    for (p, _) in files {
        let rel = p.strip_prefix("src/").unwrap_or(p).trim_end_matches(".rs");
        let mut segs: Vec<String> = rel.split('/').map(str::to_string).collect();
        if segs.last().is_some_and(|s| s == "mod" || s == "lib") {
            segs.pop();
        }
        module_file.insert(segs, p.clone());
    }
    let facts: BTreeMap<String, FileFacts> = files
        .iter()
        .map(|(p, text)| (p.clone(), facts(text)))
        .collect();
    let module_of: BTreeMap<String, ModPath> = module_file
        .iter()
        .map(|(m, f)| (f.clone(), m.clone()))
        .collect();
    let r = Resolver {
        module_file: &module_file,
        module_of: &module_of,
        facts: &facts,
    };
    let mut g = Graph::new();
    for (file, f) in &facts {
        let here = &module_of[file];
        let mut to = BTreeSet::new();
        let mut names: HashMap<(Vec<String>, String), ModPath> = HashMap::new();
        for (public, inline, path, name) in &f.uses {
            if let Some(abs) = r.absolute(here, inline, path, &HashMap::new()) {
                // A re-export only hands a name on: an arrow where the file uses it too.
                let used = !public || f.words.contains(name);
                if used && let Some(target) = r.resolve(&abs, 0) {
                    to.insert(target);
                }
                names.insert((inline.clone(), name.clone()), abs);
            }
        }
        for (inline, path) in &f.paths {
            if let Some(abs) = r.absolute(here, inline, path, &names)
                && let Some(target) = r.resolve(&abs, 0)
            {
                to.insert(target);
            }
        }
        to.remove(file);
        g.insert(file.clone(), to);
    }
    g
}

struct Resolver<'a> {
    module_file: &'a BTreeMap<ModPath, String>,
    module_of: &'a BTreeMap<String, ModPath>,
    facts: &'a BTreeMap<String, FileFacts>,
}

impl Resolver<'_> {
    /// `path` as written in module `here` (inside its inline modules `inline`) made absolute,
    /// or `None` when it names nothing of the crate (std, another crate, a local name).
    fn absolute(
        &self,
        here: &ModPath,
        inline: &[String],
        path: &[String],
        names: &HashMap<(Vec<String>, String), ModPath>,
    ) -> Option<ModPath> {
        let first = path.first()?;
        let mut at: Vec<String> = here.iter().chain(inline).cloned().collect();
        let mut rest = path;
        match first.as_str() {
            "crate" => {
                at.clear();
                rest = &path[1..];
            }
            "self" => rest = &path[1..],
            "super" => {
                while rest.first().is_some_and(|s| s == "super") {
                    at.pop()?;
                    rest = &rest[1..];
                }
            }
            _ => {
                let file = self.module_file.get(here)?;
                if inline.is_empty() && self.facts[file].children.contains(first) {
                    // A child module, named from its parent.
                } else {
                    // A name a `use` brought in, here or in an enclosing inline module.
                    let found = (0..=inline.len())
                        .rev()
                        .find_map(|k| names.get(&(inline[..k].to_vec(), first.clone())))?;
                    let mut abs = found.clone();
                    abs.extend(path[1..].iter().cloned());
                    return Some(abs);
                }
            }
        }
        // Inline modules are part of their file: drop them from the path.
        at.extend(rest.iter().cloned());
        Some(at)
    }

    /// The file that defines what `abs` names, through re-exports.
    fn resolve(&self, abs: &ModPath, hops: usize) -> Option<String> {
        if hops > 16 {
            return None;
        }
        // The longest prefix that is a module of its own file.
        let mut k = abs.len();
        while k > 0 && !self.module_file.contains_key(&abs[..k]) {
            k -= 1;
        }
        let module = &abs[..k];
        let file = self.module_file.get(module)?;
        let Some(name) = abs.get(k) else {
            return Some(file.clone());
        };
        let f = &self.facts[file];
        if f.defines.contains(name) {
            return Some(file.clone());
        }
        let here = &self.module_of[file];
        for (public, inline, path, known) in &f.uses {
            if !public || !inline.is_empty() {
                continue;
            }
            let mut target = if known == name {
                self.absolute(here, inline, path, &HashMap::new())
            } else if known == "*" {
                let mut p = path.clone();
                p.push(name.clone());
                self.absolute(here, inline, &p, &HashMap::new())
            } else {
                None
            };
            if let Some(t) = target.as_mut() {
                t.extend(abs[k + 1..].iter().cloned());
                if let Some(found) = self.resolve(t, hops + 1) {
                    return Some(found);
                }
            }
        }
        Some(file.clone())
    }
}
