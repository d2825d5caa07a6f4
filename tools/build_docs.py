#!/usr/bin/env python
"""Build the docs site offline, and README.md from `index.ipynb`, without Quarto.

`nbdev_docs` renders with Quarto, which these machines cannot install. This script keeps
nbdev's half of that pipeline and replaces Quarto's half:

1. each notebook under `nbs_path` (names starting with `_` or `.` skipped, as nbdev does)
   goes through nbdev's own docs processors, `nbdev.processors.FilterDefaults`, the same
   call `nbdev_proc_nbs` makes: `#| hide` and `#| export` cells are dropped, `show_doc`
   cells are added after exported definitions and run (with the notebook's exported and
   import cells, as nbdev does, except cells flagged `slow`/`cuda`; nothing else is executed),
   the `# Title` / `> description` cell becomes the page's title;
2. Quarto's cell options that nbdev leaves behind (`#| echo: false`, `#| output: false`,
   `#| include: false`, `#| output: asis`) are applied here;
3. nbconvert's `basic` HTML template renders the stored outputs (PNG plots are inlined as
   data URIs, HTML and markdown tables are kept) inside one page layout: a left sidebar
   listing every page in notebook order and a table of contents on the right, as
   `_quarto.yml` asks of Quarto.

Pages are named as nbdev names them (`00_models.ipynb` -> `models.html`), so links written
for the published site keep working; links to `*.ipynb` and absolute links to the doc host
are made relative, so `_docs/` works from `file://`.

Usage: `python tools/build_docs.py [--dest DIR] [--readme PATH] [--only_readme] [--nbs DIR]`
(`make docs` writes `_docs/` and `README.md`; `make readme` writes `README.md` only).
"""
import argparse, html, json, os, re, sys, warnings
from contextlib import contextmanager
from pathlib import Path

import yaml

SKIP_RE = r'^[_.]'  # nbdev's rule for files and folders that are not pages

def _cfg(root):
    from nbdev.config import get_config
    return get_config(path=root)

def page_name(nb_rel: Path) -> Path:
    "The html path nbdev gives a notebook: `api/00_core.ipynb` -> `api/core.html`"
    from nbdev.doclinks import _nbpath2html
    return _nbpath2html(Path(nb_rel))

def _sort_key(rel: Path):
    "Notebook order, with each folder's `index` first (as `nbdev_sidebar`)"
    return (rel.parent.parts, rel.stem != 'index', rel.name)

def find_notebooks(nbs: Path):
    "Relative paths of the notebooks that become pages, in sidebar order"
    res = []
    for dirpath, dirnames, filenames in os.walk(nbs):
        dirnames[:] = sorted(d for d in dirnames if not re.match(SKIP_RE, d))
        for f in filenames:
            if f.endswith('.ipynb') and not re.match(SKIP_RE, f):
                res.append((Path(dirpath)/f).relative_to(nbs))
    return sorted(res, key=_sort_key)

@contextmanager
def _in_dir(d):
    old = os.getcwd()
    os.chdir(d)
    try: yield
    finally: os.chdir(old)

def _filters():
    "nbdev's `FilterDefaults`, except that cells flagged with a `tst_flags` flag are never run"
    # `_do_eval`: nbdev's own test of which cells its docs build runs (imports, show_doc, exports)
    from nbdev.processors import FilterDefaults, exec_show_docs, _do_eval
    flags = set(_cfg(Path(__file__).resolve().parent.parent).get('tst_flags', '').split())
    class exec_show_docs_unflagged(exec_show_docs):
        # nbdev runs every cell that contains an import to fill in `show_doc`, `#| slow` and `#|
        # cuda` cells included (a slow benchmark, a GPU-only cell); here they are skipped, with a
        # warning, and their stored outputs are shown.
        def __call__(self, cell):
            hit = flags & set(getattr(cell, 'directives_', {}) or {})
            if hit:
                if cell.cell_type == 'code' and _do_eval(cell):
                    first = (cell.source or '').strip().splitlines()[0]
                    print(
                        f'  warning: a cell flagged `{" ".join(sorted(hit))}` holds an import (or'
                        ' show_doc, or an export): not run here, but `nbdev_docs` would run it'
                        f' (cell starting `{first}`)',
                        file=sys.stderr)
                return
            return super().__call__(cell)
    class Filters(FilterDefaults):
        def base_procs(self):
            return [
                exec_show_docs_unflagged if p is exec_show_docs else p for p in super().base_procs()
            ]
    return Filters()

def process_nb(path: Path):
    "Run nbdev's docs processors on `path`; returns the processed execnb notebook"
    from execnb.nbio import read_nb
    nb = read_nb(path)
    os.environ['IN_TEST'] = '1'  # as `nbdev.serve_drv` does while processing
    try:
        with _in_dir(path.parent), warnings.catch_warnings():
            warnings.simplefilter('ignore')
            _filters()(nb)
    except Exception as e:
        raise RuntimeError(
            f'nbdev could not process {path} for the docs (`nbdev_docs` fails the same way).\nTo'
            ' fill in `show_doc`, nbdev runs every exported cell and every cell containing an'
            ' import; such a cell must not need anything defined in a cell that is not run: put'
            f' imports in cells of their own.\n{e}'
        ) from e
    finally:
        os.environ.pop('IN_TEST', None)
    return nb

# ---------------------------------------------------------------- Quarto cell options
_re_opt = re.compile(r'^\s*#\|\s?(.*)$')

def split_options(src: str):
    "Leading `#| key: value` lines of a code cell -> (options dict, remaining source)"
    lines, opts = src.splitlines(), {}
    i = 0
    while i < len(lines) and _re_opt.match(lines[i]):
        try: d = yaml.safe_load(_re_opt.match(lines[i]).group(1))
        except yaml.YAMLError: d = None
        if isinstance(d, dict): opts.update(d)
        i += 1
    return opts, '\n'.join(lines[i:]).strip('\n')

_re_attr_link = re.compile(r'\[([^\]]*)\]\(([^)\s]*)\)\{([^}]*)\}')

def link_attrs(md: str) -> str:
    "Pandoc's `[text](url){target=\"_blank\" style=...}` (used by `show_doc`) -> an HTML link"
    def _a(m):
        attrs = ''.join(
            f' {k}="{html.escape(v)}"' for k, v in re.findall(r'([\w-]+)="([^"]*)"', m.group(3)))
        return f'<a href="{html.escape(m.group(2))}"{attrs}>{m.group(1)}</a>'
    return _re_attr_link.sub(_a, md)

def _md_output(o):
    "Apply `link_attrs` to a display output's markdown"
    o = dict(o)
    if 'text/markdown' in o.get('data', {}):
        md = o['data']['text/markdown']
        o['data'] = {
            **o['data'],
            'text/markdown': link_attrs(md if isinstance(md, str) else ''.join(md))}
    return o

def _false(v): return v is False or str(v).lower() == 'false'

def _src(cell): return cell.get('source') or ''

def render_cells(nb):
    "Processed notebook -> plain nbformat v4 dict ready for nbconvert, Quarto options applied"
    cells = []
    for c in nb.cells:
        src, ct = _src(c), c.get('cell_type')
        if ct == 'markdown':
            # Quarto fenced divs (`::: {.callout-note}` ... `:::`) have no meaning here: keep their
            # content.
            src = '\n'.join(l for l in src.splitlines() if not l.lstrip().startswith(':::'))
            if src.strip():
                cells.append(dict(cell_type='markdown', metadata={}, source=link_attrs(src)))
        elif ct == 'code':
            opts, code = split_options(src)
            if _false(opts.get('include', True)): continue
            outputs = (
                []
                if _false(opts.get('output', True))
                else [_md_output(o) for o in c.get('outputs', [])])
            tags = ['remove_input'] if _false(opts.get('echo', True)) or not code.strip() else []
            if tags and not outputs: continue
            cells.append(dict(cell_type='code', metadata={'tags': tags}, source=code,
                              outputs=outputs, execution_count=None))
        # raw cells (frontmatter, other formats) are not shown, as in Quarto's HTML
    for i, c in enumerate(cells): c['id'] = f'cell-{i}'
    return dict(cells=cells, metadata=dict(nb.get('metadata', {})), nbformat=4, nbformat_minor=5)

def _nbnode(d):
    import nbformat
    from execnb.nbio import nb2dict
    return nbformat.reads(json.dumps(nb2dict(d)), as_version=4)

_exporter = None
def nb_html(nbd) -> str:
    "Body HTML of a notebook dict (nbconvert `basic` template, no prompts)"
    global _exporter
    if _exporter is None:
        from nbconvert import HTMLExporter
        from traitlets.config import Config
        c = Config()
        c.TagRemovePreprocessor.enabled = True
        c.TagRemovePreprocessor.remove_input_tags = {'remove_input'}
        c.HTMLExporter.exclude_input_prompt = True
        c.HTMLExporter.exclude_output_prompt = True
        c.HTMLExporter.preprocessors = ['nbconvert.preprocessors.TagRemovePreprocessor']
        _exporter = HTMLExporter(config=c, template_name='basic')
    body, _ = _exporter.from_notebook_node(_nbnode(nbd))
    return body

# ---------------------------------------------------------------- links and page layout
def fix_links(body: str, rel: Path, pages: dict, site_url: str) -> str:
    "Make `*.ipynb` and absolute doc-site links point at the offline pages, relative to `rel`"
    up = os.path.relpath('.', rel.parent.as_posix() or '.')
    def _href(m):
        url = html.unescape(m.group(2))
        if site_url and url.startswith(site_url):
            url = url[len(site_url):].lstrip('/') or 'index.html'
        elif re.match(r'^[a-z][a-z0-9+.-]*:|^#|^/', url): return m.group(0)
        else:
            path, hash_, frag = url.partition('#')
            if path.endswith('.ipynb'):
                target = os.path.normpath((rel.parent/path).as_posix())
                path = pages.get(target, page_name(Path(target))).as_posix()
                url = os.path.relpath(path, rel.parent.as_posix() or '.') + hash_ + frag
            return m.group(1) + html.escape(url) + m.group(3)
        return (
            m.group(1)
            + html.escape(os.path.normpath(os.path.join(up, url)) if up != '.' else url)
            + m.group(3))
    return re.sub(r'(href=")([^"]*)(")', _href, body)

def toc_html(body: str) -> str:
    "Right-hand table of contents from the page's h2/h3 headings"
    items = []
    for lvl, hid, inner in re.findall(
        r'<h([23])[^>]*\bid="([^"]+)"[^>]*>(.*?)</h\1>', body, flags=re.S
    ):
        text = re.sub(r'<[^>]+>', '', inner).replace('¶', '').strip()
        if text: items.append(f'<li class="toc-h{lvl}"><a href="#{hid}">{text}</a></li>')
    return f'<nav id="toc"><h2>On this page</h2><ul>{"".join(items)}</ul></nav>' if items else ''

def sidebar_html(entries, current: Path, site_title: str) -> str:
    "Left sidebar: every page, in notebook order; sub-folders become sections"
    rel = lambda p: os.path.relpath(p.as_posix(), current.parent.as_posix() or '.')
    out, section = [
        '<nav id="sidebar"><a class="site-title"'
        f' href="{rel(Path("index.html"))}">{html.escape(site_title)}</a><ul>'
    ], None
    for e in entries:
        sec = '/'.join(re.sub(r'^\d+_', '', p) for p in e['page'].parent.parts)
        if sec != section:
            if section: out.append('</ul></li>')
            if sec: out.append(f'<li class="section"><span>{html.escape(sec)}</span><ul>')
            section = sec
        cls = ' class="active"' if e['page'] == current else ''
        out.append(f'<li><a{cls} href="{rel(e["page"])}">{html.escape(e["title"])}</a></li>')
    if section: out.append('</ul></li>')
    out.append('</ul></nav>')
    return ''.join(out)

PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title} – {site_title}</title>
{description_meta}<link rel="stylesheet" href="{css}">
</head><body>
{sidebar}
<main id="content">
<header><h1 class="title">{title}</h1>{description}</header>
{body}
</main>
{toc}
</body></html>
"""

CSS = """
:root { --side: 250px; --toc: 220px; --fg: #212529; --muted: #6c757d; --line: #dee2e6;
  --accent: #2780e3; }
* { box-sizing: border-box; }
body { margin: 0; color: var(--fg);
  font: 16px/1.55 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", sans-serif; }
a { color: var(--accent); text-decoration: none; } a:hover { text-decoration: underline; }
#sidebar { position: fixed; top: 0; bottom: 0; left: 0; width: var(--side); overflow-y: auto;
  padding: 1.2rem 1rem; background: #f8f9fa; border-right: 1px solid var(--line);
    font-size: .92rem; }
#sidebar .site-title { display: block; font-size: 1.25rem; font-weight: 600; color: var(--fg);
  margin-bottom: 1rem; }
#sidebar ul { list-style: none; margin: 0; padding: 0; }
#sidebar li a { display: block; padding: .28rem .5rem; border-radius: 4px; color: #343a40; }
#sidebar li a.active { background: #e7f1fc; color: var(--accent); font-weight: 600; }
#sidebar li.section > span { display: block; margin-top: .6rem; padding: .2rem .5rem;
  font-weight: 600; color: var(--muted); }
#sidebar li.section ul { padding-left: .6rem; }
#content { margin-left: var(--side); max-width: 820px; padding: 1.5rem 2.5rem 4rem; }
@media (min-width: 1280px) { #content { margin-right: var(--toc); } }
#toc { position: fixed; top: 0; right: 0; width: var(--toc); padding: 1.5rem 1rem;
  font-size: .85rem; }
@media (max-width: 1279px) { #toc { display: none; } }
#toc h2 { font-size: .9rem; margin: 0 0 .5rem; }
#toc ul { list-style: none; margin: 0; padding: 0; border-left: 1px solid var(--line); }
#toc li { padding: .15rem .7rem; } #toc li.toc-h3 { padding-left: 1.4rem; }
#toc a { color: var(--muted); }
header .title { font-size: 2.2rem; margin: .3rem 0 .4rem; }
header .description { color: var(--muted); font-size: 1.1rem; margin: 0 0 1.5rem; }
h1, h2, h3, h4 { line-height: 1.25; } h2 { border-bottom: 1px solid var(--line);
  padding-bottom: .25rem; margin-top: 2rem; }
.anchor-link { visibility: hidden; margin-left: .3rem; font-size: .8em; }
h1:hover .anchor-link, h2:hover .anchor-link,
h3:hover .anchor-link, h4:hover .anchor-link { visibility: visible; }
pre, code { font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: .88em; }
:not(pre) > code { background: #f1f3f5; padding: .1em .3em; border-radius: 3px; }
.jp-InputArea-editor, .input_area, .highlight { background: #f8f9fa; border-radius: 4px; }
.highlight pre, pre { margin: .6rem 0; padding: .7rem .9rem; overflow-x: auto; }
.jp-Cell { margin: .4rem 0; }
.jp-OutputArea-output pre { background: transparent; border-left: 3px solid var(--line);
  border-radius: 0; }
.jp-RenderedText[data-mime-type="application/vnd.jupyter.stderr"] pre { background: #fff5f5; }
img { max-width: 100%; height: auto; }
table { border-collapse: collapse; margin: .8rem 0; font-size: .92rem; display: block;
  overflow-x: auto; }
th, td { border: 1px solid var(--line); padding: .3rem .6rem; text-align: left; }
thead th, th { background: #f1f3f5; }
blockquote { margin: .5rem 0; padding: .2rem 1rem; border-left: 4px solid var(--line);
  color: #495057; }
hr { border: 0; border-top: 1px solid var(--line); margin: 1.5rem 0; }
"""

ASSETS = ('.png', '.jpg', '.svg', '.json', '.jsonl')

def copy_assets(nbs: Path, dest: Path):
    "Files the pages link to (plots, raw results) copied beside the pages, as Quarto copies them"
    import shutil
    for dirpath, dirnames, filenames in os.walk(nbs):
        dirnames[:] = sorted(d for d in dirnames if not re.match(SKIP_RE, d))
        for f in filenames:
            if f.endswith(ASSETS) and not re.match(SKIP_RE, f):
                src = Path(dirpath)/f
                out = dest/src.relative_to(nbs)
                out.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, out)

def build_site(root: Path, dest: Path, processed: dict, nbs_dir: Path):
    "Write every processed notebook as a page under `dest`"
    from pygments.formatters import HtmlFormatter
    cfg = _cfg(root)
    site_title = cfg.get('title', cfg.lib_name)
    site_url = f"{cfg.get('doc_host', '')}{cfg.get('doc_baseurl', '')}".rstrip('/')
    dest.mkdir(parents=True, exist_ok=True)
    (dest / 'styles.css').write_text(
        CSS + HtmlFormatter(style='default').get_style_defs('.highlight'), encoding='utf-8')
    entries = [
        dict(rel=rel, page=page_name(rel), title=fm_title(nb, rel), nb=nb)
        for rel, nb in processed.items()]
    pages = {e['rel'].as_posix(): e['page'] for e in entries}
    for e in entries:
        fm = getattr(e['nb'], 'frontmatter_', {}) or {}
        body = fix_links(nb_html(render_cells(e['nb'])), e['page'], pages, site_url)
        desc = fm.get('description', '')
        out = dest/e['page']
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(
            PAGE.format(
                title=html.escape(e['title'], quote=False),
                site_title=html.escape(site_title),
                description=f'<p class="description">{html.escape(desc)}</p>' if desc else '',
                description_meta=(
                    f'<meta name="description" content="{html.escape(desc)}">\n' if desc else ''),
                css=os.path.relpath('styles.css', e['page'].parent.as_posix() or '.'),
                sidebar=sidebar_html(entries, e['page'], site_title),
                body=body,
                toc=toc_html(body)),
            encoding='utf-8')
    copy_assets(nbs_dir, dest)
    if not (dest/'index.html').exists() and entries:  # no index.ipynb: land on the first page
        first = entries[0]['page'].as_posix()
        (dest / 'index.html').write_text(
            f'<!DOCTYPE html><meta http-equiv="refresh" content="0; url={first}">', encoding='utf-8'
        )
    return entries

def fm_title(nb, rel: Path) -> str:
    fm = getattr(nb, 'frontmatter_', {}) or {}
    return str(fm.get('title') or rel.stem)

# ---------------------------------------------------------------- README.md
def readme_text(nb, nb_rel_to_root: Path) -> str:
    "README.md from the processed `index.ipynb`, laid out as `nbdev_readme` lays it out"
    fm = getattr(nb, 'frontmatter_', {}) or {}
    nbdir = nb_rel_to_root.parent.as_posix()
    def _link(
        m):  # links to notebooks and local files are relative to nbs/; the README sits at the root
        url = m.group(2)
        if re.match(r'^[a-z][a-z0-9+.-]*:|^#|^/', url): return m.group(0)
        return f'{m.group(1)}{os.path.normpath(os.path.join(nbdir, url))}{m.group(3)}'
    parts = [f"# {fm.get('title', 'README')}"]  # nbdev's `insert_warning` cell follows
    if fm.get('description'): parts.append(f"> {fm['description']}")
    for c in render_cells(nb)['cells']:
        if c['cell_type'] == 'markdown':
            parts.append(re.sub(r'(\]\()([^)\s]+)(\))', _link, c['source'].strip()))
        else:
            if 'remove_input' not in c['metadata']['tags']:
                parts.append(f"```python\n{c['source']}\n```")
            for o in c['outputs']:
                data = o.get('data', {})
                if o.get('output_type') == 'stream':
                    parts.append('```\n' + ''.join(o['text']).rstrip() + '\n```')
                elif 'text/markdown' in data: parts.append(''.join(data['text/markdown']).strip())
                elif 'text/plain' in data:
                    parts.append('```\n' + ''.join(data['text/plain']).rstrip() + '\n```')
    return '\n\n'.join(parts) + '\n'

# ---------------------------------------------------------------- main
def main(argv=None):
    root = Path(__file__).resolve().parent.parent
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--dest', help='output folder (default: doc_path from settings.ini, `_docs`)')
    p.add_argument(
        '--readme', default=None,
        help='where to write README.md (default: the repo root); "" for none')
    p.add_argument('--only_readme', action='store_true', help='write README.md only, not the site')
    p.add_argument('--nbs', help='notebooks folder (default: nbs_path from settings.ini)')
    a = p.parse_args(argv)
    cfg = _cfg(root)
    nbs = Path(a.nbs).resolve() if a.nbs else Path(cfg.nbs_path)
    rels = find_notebooks(nbs)
    readme_nb = Path(cfg.get('readme_nb', 'index.ipynb'))
    if a.only_readme: rels = [r for r in rels if r == readme_nb]
    processed = {}
    for rel in rels:
        print(f'processing {rel}', file=sys.stderr)
        processed[rel] = process_nb(nbs/rel)
    readme = Path(a.readme) if a.readme else (None if a.readme == '' else root/'README.md')
    if readme is not None:
        if readme_nb not in processed:
            sys.exit(f'{nbs/readme_nb} not found: cannot write README.md')
        readme.parent.mkdir(parents=True, exist_ok=True)
        readme.write_text(
            readme_text(processed[readme_nb], Path(os.path.relpath(nbs / readme_nb, root))),
            encoding='utf-8')
        print(f'wrote {readme}', file=sys.stderr)
    if a.only_readme: return
    dest = Path(a.dest) if a.dest else Path(cfg.doc_path)
    entries = build_site(root, dest, processed, nbs)
    print(f'wrote {len(entries)} pages to {dest}/ (open {dest}/index.html)', file=sys.stderr)

if __name__ == '__main__': main()
