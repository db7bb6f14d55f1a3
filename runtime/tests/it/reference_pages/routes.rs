//! `docs/reference/routes.md`: every route a node answers — method, path, and who may call it.
//!
//! Paths and methods come from the real routers (`web::routes`, `web::health_port_routes`):
//! axum cannot list its routes, but its `Debug` output names every path and the methods each
//! has. Who may call a route is what its handler's signature asks for — the extractors of
//! `web::auth` (`Needs<need::X>` and the rest) — read from the source with syn, from the
//! `.route(…)` calls that build those routers; the test fails unless the routes found in the
//! source are exactly the routers' own.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

use super::{check_part, repo};

const PAGE: &str = "docs/reference/routes.md";

/// The methods axum's `MethodRouter` holds, in its `Debug` order (HEAD, OPTIONS, TRACE and
/// CONNECT are not listed: GET answers HEAD, and no route registers the others).
const METHODS: [&str; 5] = ["get", "delete", "patch", "post", "put"];

// ---------------------------------------------------------------- the routers themselves

/// path → methods (`any` for a route that takes every method) of a router, from its `Debug`.
fn live(router: &axum::Router<hollo_runtime::web::AppState>) -> BTreeMap<String, BTreeSet<String>> {
    let debug = format!("{router:?}");
    // Only the path router: the fallback router has none of ours.
    let debug = debug
        .split("fallback_router:")
        .next()
        .expect("a Router's Debug output");
    let id_of = |s: &str| {
        s.trim()
            .trim_start_matches("RouteId(")
            .trim_end_matches(')')
            .to_string()
    };
    // `paths: {RouteId(3): "/x/{id}", …}`: the map ends at the first `}` outside quotes.
    let paths_start = debug
        .find("paths: {")
        .expect("the Node's paths in Router's Debug")
        + 8;
    let mut quoted = false;
    let mut escaped = false;
    let paths_end = paths_start
        + debug[paths_start..]
            .char_indices()
            .find(|&(_, c)| {
                let end = c == '}' && !quoted;
                match c {
                    _ if escaped => escaped = false,
                    '\\' => escaped = true,
                    '"' => quoted = !quoted,
                    _ => {}
                }
                end
            })
            .expect("end of paths")
            .0;
    let mut paths = BTreeMap::new();
    for entry in debug[paths_start..paths_end].split(", RouteId(") {
        let (id, path) = entry.split_once(": ").expect("RouteId(n): \"path\"");
        paths.insert(id_of(id), path.trim().trim_matches('"').to_string());
    }
    // `routes: {RouteId(3): MethodRouter(MethodRouter { get: BoxedHandler, head: None, … }), …}`
    let mut out = BTreeMap::new();
    for part in debug.split("RouteId(").skip(1) {
        let Some((id, rest)) = part.split_once("): MethodRouter(MethodRouter {") else {
            continue;
        };
        let fields: BTreeMap<&str, &str> = rest
            .split(", ")
            .take_while(|f| !f.starts_with("fallback"))
            .filter_map(|f| f.split_once(": "))
            .map(|(k, v)| (k.trim(), v.trim()))
            .collect();
        let mut methods: BTreeSet<String> = METHODS
            .iter()
            .filter(|m| fields.get(*m).is_some_and(|v| *v != "None"))
            .map(|m| m.to_string())
            .collect();
        if fields.values().all(|v| *v == "None") {
            methods.insert("any".into());
        }
        let path = paths
            .get(&id_of(id))
            .unwrap_or_else(|| panic!("route {id} has no path in {debug}"));
        out.insert(path.clone(), methods);
    }
    assert_eq!(out.len(), paths.len(), "every path has its methods");
    out
}

fn state() -> hollo_runtime::web::AppState {
    // Building the routers opens no connection.
    let pool = sqlx::postgres::PgPoolOptions::new()
        .connect_lazy("postgres://nobody@127.0.0.1:1/none")
        .expect("a lazy pool");
    hollo_runtime::web::AppState::new(pool, None)
}

// ---------------------------------------------------------------- the source

/// One module of the runtime's source: its items and what its `use` declarations name.
struct Module {
    items: Vec<syn::Item>,
    /// alias → the path it stands for, as written (relative to this module).
    uses: BTreeMap<String, Vec<String>>,
    globs: Vec<Vec<String>>,
}

fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.meta
                .require_list()
                .is_ok_and(|l| l.tokens.to_string().contains("test"))
    })
}

fn flatten_use(
    tree: &syn::UseTree,
    prefix: Vec<String>,
    uses: &mut BTreeMap<String, Vec<String>>,
    globs: &mut Vec<Vec<String>>,
) {
    let with = |p: &Vec<String>, s: String| {
        let mut p = p.clone();
        p.push(s);
        p
    };
    match tree {
        syn::UseTree::Path(p) => {
            flatten_use(&p.tree, with(&prefix, p.ident.to_string()), uses, globs)
        }
        syn::UseTree::Name(n) if n.ident == "self" => {
            if let Some(last) = prefix.last() {
                uses.insert(last.clone(), prefix.clone());
            }
        }
        syn::UseTree::Name(n) => {
            uses.insert(n.ident.to_string(), with(&prefix, n.ident.to_string()));
        }
        syn::UseTree::Rename(r) => {
            uses.insert(r.rename.to_string(), with(&prefix, r.ident.to_string()));
        }
        syn::UseTree::Glob(_) => globs.push(prefix),
        syn::UseTree::Group(g) => {
            for t in &g.items {
                flatten_use(t, prefix.clone(), uses, globs);
            }
        }
    }
}

/// Every module of `runtime/src` (the binaries' own files left out), by path (`["web", "auth"]`).
struct Source {
    modules: BTreeMap<Vec<String>, Module>,
}

impl Source {
    fn load() -> Source {
        let src = repo().join("runtime/src");
        let mut modules = BTreeMap::new();
        let mut dirs = vec![src.clone()];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).expect("runtime/src") {
                let path = entry.expect("entry").path();
                if path.is_dir() && !path.ends_with("bin") {
                    dirs.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") && !path.ends_with("main.rs")
                {
                    let file = syn::parse_file(&std::fs::read_to_string(&path).expect("read"))
                        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                    add_module(&mut modules, module_path(&src, &path), file.items);
                }
            }
        }
        Source { modules }
    }

    /// `segs`, written in `module`, as a path from the crate root; `None` outside the crate.
    fn absolute(&self, module: &[String], segs: &[String]) -> Option<Vec<String>> {
        let first = segs.first()?;
        match first.as_str() {
            "crate" => Some(segs[1..].to_vec()),
            "super" => self.absolute(
                &module[..module.len().checked_sub(1)?],
                &self_path(&segs[1..]),
            ),
            "self" => Some([module, &segs[1..]].concat()),
            _ => {
                let m = self.modules.get(module)?;
                let child = [module, &segs[..1]].concat();
                if self.modules.contains_key(&child) || declares(m, first) {
                    return Some([module, segs].concat());
                }
                // `use x::y` is relative to the module, like any path in it.
                let target = m.uses.get(first).filter(|t| t.first() != Some(first))?;
                self.absolute(module, &[target.as_slice(), &segs[1..]].concat())
            }
        }
    }

    /// The item a path from the crate root names, following `pub use` re-exports and globs.
    fn item(&self, path: &[String]) -> Option<(Vec<String>, &syn::Item)> {
        self.item_at(path, 0)
    }

    fn item_at(&self, path: &[String], depth: usize) -> Option<(Vec<String>, &syn::Item)> {
        if depth > 8 {
            return None;
        }
        let (name, module) = path.split_last()?;
        let m = self.modules.get(module)?;
        let own = m.items.iter().find(|i| match i {
            syn::Item::Fn(f) => f.sig.ident == name,
            syn::Item::Const(c) => c.ident == name,
            _ => false,
        });
        if let Some(i) = own {
            return Some((module.to_vec(), i));
        }
        if let Some(target) = m.uses.get(name) {
            let abs = self.absolute(module, target)?;
            if abs != path {
                return self.item_at(&abs, depth + 1);
            }
        }
        m.globs.iter().find_map(|g| {
            let abs =
                self.absolute(module, &[g.as_slice(), std::slice::from_ref(name)].concat())?;
            (abs != path)
                .then(|| self.item_at(&abs, depth + 1))
                .flatten()
        })
    }

    fn resolve(&self, module: &[String], segs: &[String]) -> Option<(Vec<String>, &syn::Item)> {
        self.item(&self.absolute(module, segs)?)
    }
}

/// Whether `m` declares an item (of any kind) named `name`.
fn declares(m: &Module, name: &str) -> bool {
    m.items.iter().any(|i| match i {
        syn::Item::Fn(f) => f.sig.ident == name,
        syn::Item::Const(c) => c.ident == name,
        syn::Item::Static(s) => s.ident == name,
        syn::Item::Struct(s) => s.ident == name,
        syn::Item::Enum(e) => e.ident == name,
        syn::Item::Type(t) => t.ident == name,
        syn::Item::Trait(t) => t.ident == name,
        _ => false,
    })
}

/// `super::x` continues from the parent: the rest as a path written there (`self::…`).
fn self_path(rest: &[String]) -> Vec<String> {
    [vec!["self".to_string()], rest.to_vec()].concat()
}

fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let rel: PathBuf = file
        .strip_prefix(src)
        .expect("under src")
        .with_extension("");
    let mut segs: Vec<String> = rel
        .iter()
        .map(|s| s.to_string_lossy().into_owned())
        .collect();
    if matches!(segs.last().map(String::as_str), Some("mod" | "lib")) {
        segs.pop();
    }
    segs
}

fn add_module(
    modules: &mut BTreeMap<Vec<String>, Module>,
    path: Vec<String>,
    items: Vec<syn::Item>,
) {
    let mut uses = BTreeMap::new();
    let mut globs = Vec::new();
    let mut kept = Vec::new();
    for item in items {
        match item {
            syn::Item::Use(u) => flatten_use(&u.tree, Vec::new(), &mut uses, &mut globs),
            syn::Item::Mod(m) if is_test_only(&m.attrs) => {}
            syn::Item::Mod(m) if m.content.is_some() => {
                let (_, inner) = m.content.expect("inline module");
                add_module(
                    modules,
                    [path.clone(), vec![m.ident.to_string()]].concat(),
                    inner,
                );
            }
            other => kept.push(other),
        }
    }
    modules.insert(
        path,
        Module {
            items: kept,
            uses,
            globs,
        },
    );
}

fn segments(p: &syn::Path) -> Vec<String> {
    p.segments.iter().map(|s| s.ident.to_string()).collect()
}

// ---------------------------------------------------------------- routes in the source

/// One `.route(path, get(h).post(h2))` of the source: path, and per method its handler.
struct SourceRoute {
    module: Vec<String>,
    path: String,
    handlers: Vec<(String, syn::Expr)>,
}

struct RouteCalls<'a> {
    source: &'a Source,
    module: Vec<String>,
    out: Vec<SourceRoute>,
}

impl<'ast> Visit<'ast> for RouteCalls<'_> {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if !is_test_only(&m.attrs) {
            syn::visit::visit_item_mod(self, m);
        }
    }

    fn visit_expr_method_call(&mut self, call: &'ast syn::ExprMethodCall) {
        syn::visit::visit_expr_method_call(self, call);
        if call.method != "route" || call.args.len() != 2 {
            return;
        }
        let path = route_path(self.source, &self.module, &call.args[0]);
        self.out.push(SourceRoute {
            module: self.module.clone(),
            path,
            handlers: method_handlers(&call.args[1]),
        });
    }
}

/// A route's path as the source writes it: a literal, a string constant, or `&format!` of a
/// literal with constants inlined (`&format!("{PATH}/{{mac}}")`).
fn route_path(source: &Source, module: &[String], expr: &syn::Expr) -> String {
    let literal = |e: &syn::Expr| match e {
        syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Str(s),
            ..
        }) => Some(s.value()),
        _ => None,
    };
    let constant = |name: &[String]| {
        let (_, item) = source
            .resolve(module, name)
            .unwrap_or_else(|| panic!("the route path {name:?} names no constant"));
        match item {
            syn::Item::Const(c) => literal(&c.expr).expect("a string constant"),
            _ => panic!("the route path {name:?} is not a constant"),
        }
    };
    if let Some(s) = literal(expr) {
        return s;
    }
    match expr {
        syn::Expr::Path(p) => constant(&segments(&p.path)),
        syn::Expr::Reference(r) => route_path(source, module, &r.expr),
        syn::Expr::Macro(m) if m.mac.path.is_ident("format") => {
            let args = m
                .mac
                .parse_body_with(
                    syn::punctuated::Punctuated::<syn::Expr, syn::Token![,]>::parse_terminated,
                )
                .expect("format! arguments");
            assert_eq!(
                args.len(),
                1,
                "format! of a route path with inline names only"
            );
            let template = literal(&args[0]).expect("a format string");
            // `{NAME}` is a constant, `{{`/`}}` a brace.
            let mut out = String::new();
            let mut rest = template.as_str();
            while let Some(i) = rest.find(['{', '}']) {
                out.push_str(&rest[..i]);
                let tail = &rest[i..];
                if tail.starts_with("{{") || tail.starts_with("}}") {
                    out.push_str(&tail[..1]);
                    rest = &tail[2..];
                } else {
                    let end = tail.find('}').expect("a closed {NAME}");
                    out.push_str(&constant(&[tail[1..end].to_string()]));
                    rest = &tail[end + 1..];
                }
            }
            out + rest
        }
        other => panic!(
            "a route path the reference cannot read: {}",
            quote_expr(other)
        ),
    }
}

fn quote_expr(e: &syn::Expr) -> String {
    format!("{:?}", e).chars().take(200).collect()
}

/// `get(a).post(b).layer(…)` → [("get", a), ("post", b)].
fn method_handlers(expr: &syn::Expr) -> Vec<(String, syn::Expr)> {
    let routing = |name: &str| METHODS.contains(&name) || name == "any";
    match expr {
        syn::Expr::Call(c) => match &*c.func {
            syn::Expr::Path(p)
                if routing(&segments(&p.path).last().cloned().unwrap_or_default()) =>
            {
                vec![(
                    segments(&p.path).last().cloned().unwrap_or_default(),
                    c.args[0].clone(),
                )]
            }
            _ => panic!(
                "a method router the reference cannot read: {}",
                quote_expr(expr)
            ),
        },
        syn::Expr::MethodCall(m) => {
            let mut out = method_handlers(&m.receiver);
            let name = m.method.to_string();
            if routing(&name) {
                out.push((name, m.args[0].clone()));
            }
            out
        }
        syn::Expr::Paren(p) => method_handlers(&p.expr),
        _ => panic!(
            "a method router the reference cannot read: {}",
            quote_expr(expr)
        ),
    }
}

/// Who may call a handler, from the extractors its signature takes.
fn auth_of(source: &Source, module: &[String], handler: &syn::Expr) -> String {
    let path = match handler {
        syn::Expr::Path(p) => &p.path,
        syn::Expr::Closure(_) => return "—".into(),
        other => panic!("a handler the reference cannot read: {}", quote_expr(other)),
    };
    let Some((_, item)) = source.resolve(module, &segments(path)) else {
        return macro_handler_auth(source, module, &segments(path))
            .unwrap_or_else(|| panic!("handler {:?} (in {module:?}) not found", segments(path)));
    };
    let syn::Item::Fn(f) = item else {
        panic!("handler {:?} is not a function", segments(path))
    };
    // A generic handler (`act::<need::WriteFavourites>`): its type parameters as given.
    let given: Vec<String> = match &path.segments.last().expect("a segment").arguments {
        syn::PathArguments::AngleBracketed(a) => a
            .args
            .iter()
            .filter_map(|g| match g {
                syn::GenericArgument::Type(syn::Type::Path(t)) => segments(&t.path).last().cloned(),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    let params: Vec<String> = f
        .sig
        .generics
        .type_params()
        .map(|p| p.ident.to_string())
        .collect();
    let marker = |t: &syn::PathSegment| -> String {
        let syn::PathArguments::AngleBracketed(a) = &t.arguments else {
            panic!("Needs without its scope marker")
        };
        let name = a
            .args
            .iter()
            .find_map(|g| match g {
                syn::GenericArgument::Type(syn::Type::Path(t)) => segments(&t.path).last().cloned(),
                _ => None,
            })
            .expect("a marker type");
        let name = params
            .iter()
            .position(|p| *p == name)
            .and_then(|i| given.get(i).cloned())
            .unwrap_or(name);
        scopes_of(&name)
    };
    let mut found = Vec::new();
    for input in &f.sig.inputs {
        let syn::FnArg::Typed(t) = input else {
            continue;
        };
        let syn::Type::Path(ty) = &*t.ty else {
            continue;
        };
        let Some(last) = ty.path.segments.last() else {
            continue;
        };
        match last.ident.to_string().as_str() {
            "Needs" => found.push(format!("token: {}", marker(last))),
            "MaybeNeeds" => found.push(format!("optional token: {}", marker(last))),
            "Caller" => found.push("token".into()),
            "MaybeCaller" => found.push("optional token".into()),
            "Admin" => found.push("`ADMIN_TOKEN`".into()),
            _ => {}
        }
    }
    if found.is_empty() {
        "—".into()
    } else {
        found.join("; ")
    }
}

/// The scopes a `need::` marker takes, as the table writes them.
fn scopes_of(marker: &str) -> String {
    hollo_runtime::web::auth::need::ALL
        .iter()
        .find(|(n, _)| *n == marker)
        .unwrap_or_else(|| panic!("no scope marker need::{marker}"))
        .1
        .iter()
        .map(|s| format!("`{s}`"))
        .collect::<Vec<_>>()
        .join(" or ")
}

/// A handler a `macro_rules!` of its module makes, one per entry `name: need::Marker => …;` of
/// the macro's invocation, taking `Needs<$need>` (or `MaybeNeeds<$need>`) (`web::exports`).
fn macro_handler_auth(source: &Source, module: &[String], handler: &[String]) -> Option<String> {
    let [name] = handler else { return None };
    let m = source.modules.get(module)?;
    let macros = m.items.iter().filter_map(|i| match i {
        syn::Item::Macro(mac) => Some(mac),
        _ => None,
    });
    for invocation in macros.clone().filter(|mac| mac.ident.is_none()) {
        let tokens = invocation.mac.tokens.to_string();
        let Some(marker) = tokens.split(';').find_map(|entry| {
            let (entry_name, rest) = entry.split_once(':')?;
            let ty = rest.split("=>").next()?;
            (entry_name.trim() == name).then(|| {
                ty.rsplit("::")
                    .next()
                    .unwrap_or_default()
                    .trim()
                    .to_string()
            })
        }) else {
            continue;
        };
        let called = invocation.mac.path.segments.last()?.ident.to_string();
        let definition = macros
            .clone()
            .find(|mac| mac.ident.as_ref().is_some_and(|i| *i == called))?;
        let body = definition.mac.tokens.to_string().replace(' ', "");
        if body.contains("MaybeNeeds<$") {
            return Some(format!("optional token: {}", scopes_of(&marker)));
        }
        if body.contains("Needs<$") {
            return Some(format!("token: {}", scopes_of(&marker)));
        }
    }
    None
}

/// (path, method) → auth of every route the source registers under `web`.
fn source_routes(source: &Source) -> BTreeMap<(String, String), String> {
    let mut out = BTreeMap::new();
    for (module, m) in &source.modules {
        if module.first().map(String::as_str) != Some("web") {
            continue;
        }
        let mut calls = RouteCalls {
            source,
            module: module.clone(),
            out: Vec::new(),
        };
        for item in &m.items {
            calls.visit_item(item);
        }
        for route in calls.out {
            for (method, handler) in &route.handlers {
                let auth = auth_of(source, &route.module, handler);
                let before = out.insert((route.path.clone(), method.clone()), auth);
                assert!(before.is_none(), "{method} {} registered twice", route.path);
            }
        }
    }
    out
}

// ---------------------------------------------------------------- the page

fn table(
    live: &BTreeMap<String, BTreeSet<String>>,
    auth: &BTreeMap<(String, String), String>,
) -> String {
    let mut out = String::from("| method | path | who may call it |\n|---|---|---|\n");
    for (path, methods) in live {
        for method in methods {
            let who = auth
                .get(&(path.clone(), method.clone()))
                .map_or("—", String::as_str);
            out.push_str(&format!(
                "| {} | `{path}` | {who} |\n",
                method.to_uppercase()
            ));
        }
    }
    out
}

fn generated() -> (String, String) {
    let state = state();
    let public = live(&hollo_runtime::web::routes(&state));
    let health = live(&hollo_runtime::web::health_port_routes());
    let source = Source::load();
    let auth = source_routes(&source);
    // The source's routes are exactly the routers' own (the two ports share /healthz, /readyz).
    let mut from_source: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (path, method) in auth.keys() {
        from_source
            .entry(path.clone())
            .or_default()
            .insert(method.clone());
    }
    let mut from_routers = public.clone();
    for (path, methods) in &health {
        from_routers
            .entry(path.clone())
            .or_default()
            .extend(methods.iter().cloned());
    }
    assert_eq!(
        from_source, from_routers,
        "the `.route(…)` calls under runtime/src/web and the routers' own routes differ"
    );
    (table(&public, &auth), table(&health, &auth))
}

#[tokio::test]
async fn routes_reference_is_current() {
    let (public, health) = generated();
    assert!(
        public.lines().count() > 150
            && public
                .contains("| GET | `/api/v1/statuses/{id}` | optional token: `read:statuses` |"),
        "the public port's routes, with their scopes:\n{public}"
    );
    assert!(health.contains("| GET | `/metrics` | — |"), "{health}");
    check_part(PAGE, "public-routes", &public);
    check_part(PAGE, "health-routes", &health);
}
