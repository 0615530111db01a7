#!/usr/bin/env python3
"""Checks the import structure of the workspace's Rust sources.

Three rules, each reported with the files or modules involved:

1. no file imports a file that imports it back, directly or through a chain (a `use` of an item
   re-exported by a `mod.rs` counts as an import of the file that defines the item);
2. no top-level module of a crate imports another that imports it back;
3. in the host, no top-level module imports one from a layer above it (`LAYERS`, lowest first).

Usage: .ci/check-imports.py [CRATE_SRC_DIR ...]   (default: every crate of the workspace)
"""
import os, re, sys
from collections import defaultdict

def modules(src):
    mods = {}
    for dp, _, fs in os.walk(src):
        for f in fs:
            if not f.endswith('.rs'): continue
            p = os.path.join(dp, f)
            rel = os.path.relpath(p, src)[:-3].split(os.sep)
            if rel in (['lib'], ['main']): key = ()
            elif rel[-1] == 'mod': key = tuple(rel[:-1])
            else: key = tuple(rel)
            if rel == ['main'] and () in mods: continue
            mods.setdefault(key, p)
    return mods

def strip_comments(t):
    t = re.sub(r'//[^\n]*', '', t)
    t = re.sub(r'/\*.*?\*/', '', t, flags=re.S)
    t = re.sub(r'"(\\.|[^"\\])*"', '""', t)
    return t

def inline_depth(text, pos):
    """How many inline `mod x { ... }` blocks enclose position pos."""
    depth = 0
    for m in re.finditer(r'\bmod\s+\w+\s*\{', text):
        if m.start() >= pos: break
        d, i = 1, m.end()
        while i < len(text) and d:
            if text[i] == '{': d += 1
            elif text[i] == '}': d -= 1
            i += 1
        if i > pos: depth += 1
    return depth

def use_paths(text):
    """Yield lists of path segments for every use-tree leaf and inline crate/super/self path."""
    out = []
    def fix(segs, pos):
        k = inline_depth(text, pos)
        while k and segs and segs[0] == 'super':
            segs = ['self'] + segs[1:] if len(segs) > 1 and segs[1] != 'super' else segs[1:]
            k -= 1
        return segs
    for m in re.finditer(r'\b(pub(\([^)]*\))?\s+)?use\s+([^;]+);', text):
        pub = bool(m.group(1))
        for segs, alias in expand(m.group(3).replace('\n', ' ')):
            out.append((pub, (fix(segs, m.start()), alias)))
    body = re.sub(r'\buse\s+[^;]+;', lambda m: ' ' * len(m.group(0)), text)
    for m in re.finditer(r'\b((?:crate|super|self)(?:::\w+)+)', body):
        out.append((False, (fix(m.group(1).split('::'), m.start()), None)))
    return out

def expand(tree):
    tree = tree.strip()
    # returns list of (segments, alias)
    depth = 0
    for i, ch in enumerate(tree):
        if ch == '{':
            prefix = tree[:i].rstrip(':').strip()
            inner = tree[i+1:tree.rindex('}')]
            parts, cur, d = [], '', 0
            for c in inner:
                if c == ',' and d == 0: parts.append(cur); cur = ''; continue
                if c == '{': d += 1
                if c == '}': d -= 1
                cur += c
            parts.append(cur)
            res = []
            for part in parts:
                part = part.strip()
                if not part: continue
                for segs, alias in expand(part):
                    pre = [s for s in prefix.split('::') if s] if prefix else []
                    if segs == ['self']: res.append((pre, alias or (pre[-1] if pre else None)))
                    else: res.append((pre + segs, alias))
            return res
    alias = None
    m = re.match(r'(.*)\s+as\s+(\w+)$', tree)
    if m: tree, alias = m.group(1), m.group(2)
    return [([s.strip() for s in tree.split('::') if s.strip()], alias)]

def main(src):
    mods = modules(src)
    file_of = mods
    texts = {k: strip_comments(open(p).read()) for k, p in mods.items()}
    reexports = {}
    for k, t in texts.items():
        r = {}
        for pub, (segs, alias) in use_paths(t):
            if not pub or not segs: continue
            name = alias or segs[-1]
            r[name] = segs
        reexports[k] = r

    def absolute(cur, segs):
        segs = list(segs)
        if not segs: return None
        if segs[0] == 'crate': base, segs = (), segs[1:]
        elif segs[0] in ('super', 'self'):
            base = cur
            while segs and segs[0] in ('super', 'self'):
                if segs[0] == 'super': base = base[:-1]
                segs = segs[1:]
        elif cur + (segs[0],) in mods: base = cur
        elif (segs[0],) in mods and cur == (): base = ()
        else: return None  # extern crate
        return base, segs

    def resolve(cur, segs, seen=0):
        a = absolute(cur, segs)
        if a is None or seen > 10: return None
        base, rest = a
        m = base
        while rest and m + (rest[0],) in mods:
            m = m + (rest[0],); rest = rest[1:]
        if rest and rest[0] != '*' and rest[0] in reexports.get(m, {}):
            r = resolve(m, reexports[m][rest[0]], seen + 1)
            if r is not None: return r
        return m

    edges = defaultdict(set)
    for k, t in texts.items():
        # the module a file's code lives in is its own key
        for _, (segs, _) in use_paths(t):
            tgt = resolve(k, segs)
            if tgt is not None and tgt != k and tgt in mods:
                # importing an ancestor's item counts; a declared child (mod x;) does not by itself
                edges[k].add(tgt)
    return mods, edges

def sccs(nodes, edges):
    index, low, stack, on, res, i = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)
    def strong(v):
        index[v] = low[v] = i[0]; i[0] += 1; stack.append(v); on.add(v)
        for w in edges.get(v, ()):
            if w not in index: strong(w); low[v] = min(low[v], low[w])
            elif w in on: low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop(); on.discard(w); comp.append(w)
                if w == v: break
            res.append(comp)
    for v in nodes:
        if v not in index: strong(v)
    return [c for c in res if len(c) > 1]

def module_cycles(src):
    """Cycles between a crate's top-level modules (each module's files taken together)."""
    mods, edges = main(src)
    top = lambda k: k[:1]
    medges = defaultdict(set)
    for a, ts in edges.items():
        for b in ts:
            if top(a) != top(b) and top(a) and top(b):
                medges[top(a)].add(top(b))
    return sccs(sorted({top(k) for k in mods if k}), medges), medges


# The host's top-level modules, lowest layer first: a module may import only from its own layer
# or the layers before it. Modules on one line share a layer.
LAYERS = [
    ["utc"],
    ["events", "allocator"],
    ["credentials"],
    ["config"],
    ["engine"],
    ["state"],
    ["alignment"],
    ["scaling"],
    ["plugins"],
    ["backpressure"],
    ["sim"],
    ["plan"],
    ["runner"],
    ["serve"],
    ["cli"],
]


def layer_violations(src, layers):
    _, medges = module_cycles(src)
    rank = {name: i for i, layer in enumerate(layers) for name in layer}
    bad = []
    for (a,), targets in sorted(medges.items()):
        for (b,) in sorted(targets):
            if a not in rank or b not in rank:
                bad.append(f"module `{a if a not in rank else b}` is not in LAYERS")
            elif rank[b] > rank[a]:
                bad.append(f"`{a}` imports `{b}`, a layer above it")
    return sorted(set(bad))


if __name__ == '__main__':
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    dirs = sys.argv[1:] or sorted(
        os.path.join(dp) for dp, dn, fs in os.walk(root)
        if os.path.basename(dp) == 'src' and 'Cargo.toml' in os.listdir(os.path.dirname(dp))
        and '/target' not in dp and '/.git' not in dp)
    problems = 0
    for src in dirs:
        mods, edges = main(src)
        rel = lambda k: os.path.relpath(mods[k], root)
        for comp in sccs(list(mods), edges):
            problems += 1
            print(f"import cycle between {len(comp)} files:")
            for c in sorted(comp, key=rel):
                back = sorted(rel(d) for d in edges[c] if d in comp)
                print(f"  {rel(c)} imports {', '.join(back)}")
        cycles, _ = module_cycles(src)
        for comp in cycles:
            problems += 1
            names = ', '.join(sorted('::'.join(c) for c in comp))
            print(f"import cycle between the modules of {os.path.relpath(src, root)}: {names}")
        if os.path.relpath(src, root) == os.path.join('host', 'src'):
            for v in layer_violations(src, LAYERS):
                problems += 1
                print(f"layering in host/src: {v}")
    if problems:
        sys.exit(1)
    print(f"no import cycles in {len(dirs)} crates; host layering holds")
