"""The offline docs site (`tools/build_docs.py`, run by `make docs`).

Every notebook in `nbs/` gets a page titled from its `# Title` cell, the sidebar lists them all
and its links resolve, plots and tables from stored outputs show, README.md is what
`nbs/index.ipynb` generates, and the home page renders in a real browser (headless Chromium;
skipped when it is missing, except in CI, where that is a failure).
"""
import base64, io, json, os, re, shutil, subprocess, sys
from html import escape
from html.parser import HTMLParser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NBS = ROOT/'nbs'
BUILD = ROOT/'tools'/'build_docs.py'

def build(dest: Path, *args):
    r = subprocess.run([sys.executable, str(BUILD), '--dest', str(dest), *args],
                       cwd=ROOT, capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, f'tools/build_docs.py failed:\n{r.stdout[-3000:]}\n{r.stderr[-6000:]}'
    return r

def page_name(rel: Path) -> Path:
    "nbdev's page name for a notebook: `00_models.ipynb` -> `models.html`"
    return rel.with_name(re.sub(r'^\d+[a-zA-Z0-9]*_', '', rel.name.lower())).with_suffix('.html')

def notebooks(nbs=NBS):
    """Notebooks that are pages: nothing whose name, or any of whose folders' names, starts with `_`
    or `.`"""
    rels = [p.relative_to(nbs) for p in nbs.rglob('*.ipynb')]
    rels = [r for r in rels if not any(part[0] in '_.' for part in r.parts)]
    # each folder's index first
    return sorted(rels, key=lambda r: (r.parent.parts, r.stem != 'index', r.name))

def notebook_cells():
    "`(notebook, cell)` for every cell of every page's notebook, in page order"
    for rel in notebooks():
        for c in json.loads((NBS/rel).read_text(encoding='utf-8'))['cells']: yield rel, c

def nb_title(path: Path) -> str:
    "The `# Title` of the first markdown cell that has one"
    for c in json.loads(path.read_text(encoding='utf-8'))['cells']:
        if c['cell_type'] != 'markdown': continue
        m = re.search(r'^#\s+(\S.*?)\s*$', ''.join(c['source']), flags=re.M)
        if m: return m.group(1)
    return path.stem

class Links(HTMLParser):
    "hrefs of the `<a>` tags inside `<nav id=...>`, by nav id"
    def __init__(self):
        super().__init__()
        self.navs, self._nav, self._a, self.text = {}, None, None, []
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == 'nav': self._nav = a.get('id')
        elif tag == 'a' and self._nav: self._a = a.get('href'); self.text = []
    def handle_data(self, data):
        if self._a is not None: self.text.append(data)
    def handle_endtag(self, tag):
        if tag == 'nav': self._nav = None
        elif tag == 'a' and self._a is not None:
            self.navs.setdefault(self._nav, []).append((self._a, ''.join(self.text).strip()))
            self._a = None

def nav_links(page: Path, nav='sidebar'):
    p = Links()
    p.feed(page.read_text(encoding='utf-8'))
    return p.navs.get(nav, [])

@pytest.fixture(scope='module')
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp('site')
    build(out/'_docs', '--readme', str(out/'README.md'))
    return out

def test_every_notebook_has_a_titled_page(site):
    nbs = notebooks()
    assert (
        Path('index.ipynb') in nbs
    ), 'nbs/index.ipynb (the home page and README source) is missing'
    for rel in nbs:
        page = site/'_docs'/page_name(rel)
        assert page.exists(), f'no page for nbs/{rel} (expected {page_name(rel)})'
        text, title = page.read_text(encoding='utf-8'), escape(nb_title(NBS/rel), quote=False)
        assert (
            f'<h1 class="title">{title}</h1>' in text
        ), f'{page.name} lacks the title {title!r} of nbs/{rel}'

def test_sidebar_lists_every_page_in_order_and_resolves(site):
    docs = site/'_docs'
    expected = [(page_name(rel), nb_title(NBS/rel)) for rel in notebooks()]  # in notebook order
    for page, _ in expected:
        links = nav_links(docs/page)
        targets = [(docs/page).parent/href.partition('#')[0] for href, _ in links]
        for href, t in zip(links, targets):
            assert t.is_file(), f'{page}: sidebar link {href[0]!r} resolves to no file'
        # [0]: site title
        listed = [
            (t.resolve().relative_to(docs.resolve()), text) for t, (_, text) in zip(targets, links)
        ][1:]
        assert listed == expected, f'{page}: the sidebar lists {listed}'

def test_readme_is_generated_from_index(site):
    want = (site/'README.md').read_text(encoding='utf-8')
    have = (ROOT/'README.md').read_text(encoding='utf-8') if (ROOT/'README.md').exists() else ''
    assert (
        have == want
    ), 'README.md is not what nbs/index.ipynb generates: run `make readme` and commit README.md'
    assert want.startswith('# flashspec\n') and 'make demo\nmake test\n' in want

def _png_b64():
    import matplotlib
    matplotlib.use('agg')
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(2, 1.5), dpi=50)
    ax.plot([1, 3, 2])
    buf = io.BytesIO()
    fig.savefig(buf, format='png')
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()

def test_stored_outputs_plots_tables_and_hidden_cells(tmp_path):
    """A notebook with a stored plot, tables, a `#| hide` cell and an `#| echo: false` cell renders
    as nbdev/Quarto would"""
    code = lambda src, outputs=(): dict(
        cell_type='code', execution_count=None, metadata={}, outputs=list(outputs), source=src)
    md = lambda src: dict(cell_type='markdown', metadata={}, source=src)
    png = _png_b64()
    nb = dict(
        nbformat=4,
        nbformat_minor=5,
        metadata=dict(kernelspec=dict(name='python3', language='python', display_name='python3')),
        cells=[
            md('# A page with outputs\n> Stored outputs only'),
            code('#| hide\nhidden_secret = 1'),
            md(
                '## Results\n\n| k | speedup |\n|---|---|\n| 2 | 1.9x |\n\nSee [the home'
                ' page](index.ipynb).'),
            code(
                '#| echo: false\nplot_source_line()',
                [
                    dict(
                        output_type='display_data', metadata={},
                        data={'image/png': png, 'text/plain': ['<Figure>']})]),
            code(
                'show_table()',
                [
                    dict(
                        output_type='execute_result',
                        execution_count=None,
                        metadata={},
                        data={
                            'text/html': [
                                '<table'
                                ' class="dataframe"><tr><th>n</th></tr><tr><td>7</td></tr></table>'
                            ],
                            'text/plain': ['n 7']})])])
    nbs = tmp_path/'nbs'
    nbs.mkdir()
    (nbs/'05_outputs.ipynb').write_text(json.dumps(nb), encoding='utf-8')
    (nbs / 'index.ipynb').write_text(
        json.dumps(dict(nb, cells=[md('# Home\n> home')])), encoding='utf-8')
    (nbs / '_scratch.ipynb').write_text(
        json.dumps(dict(nb, cells=[md('# Scratch')])), encoding='utf-8')
    build(tmp_path/'_docs', '--nbs', str(nbs), '--readme', '')
    assert sorted(p.name for p in (tmp_path / '_docs').glob('*.html')) == [
        'index.html',
        'outputs.html']
    page = (tmp_path/'_docs'/'outputs.html').read_text(encoding='utf-8')
    assert f'data:image/png;base64,{png}' in page
    assert '<th>speedup</th>' in page and '<td>1.9x</td>' in page and '<td>7</td>' in page
    assert 'show_table' in page and 'hidden_secret' not in page and 'plot_source_line' not in page
    assert 'href="index.html"' in page and '<p class="description">Stored outputs only</p>' in page

def _chromium():
    return shutil.which('chromium') or shutil.which('chromium-browser')

def test_home_page_screenshot(site, tmp_path):
    exe = _chromium()
    if exe is None:
        if os.environ.get('CI', '').lower() in ('1', 'true', 'yes'):
            pytest.fail('chromium is not installed: CI must install it (.ci/run does)')
        pytest.skip('chromium is not installed')
    png = tmp_path/'home.png'
    cmd = [
        exe, '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
        '--disable-background-networking', '--disable-component-update', '--disable-sync',
        '--hide-scrollbars', f'--user-data-dir={tmp_path/"profile"}', f'--screenshot={png}',
        '--window-size=1280,900', (site / '_docs' / 'index.html').as_uri()]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert (
        png.exists() and png.stat().st_size > 0
    ), f'no screenshot (rc {r.returncode}):\n{r.stderr[-3000:]}'
    import matplotlib.image
    img = matplotlib.image.imread(str(png))[..., :3]  # floats in [0, 1]
    assert img.shape[:2] == (900, 1280)
    assert img.std() > 0.02, 'the screenshot is a blank, single-colour image'
    lum = img.mean(-1)
    sidebar, main = lum[:, :200], lum[:, 300:1000]
    assert (sidebar < 0.5).mean() > 0.002, 'no sidebar text in the screenshot'
    assert (main < 0.5).mean() > 0.01, 'no page text in the screenshot'
    assert abs(lum[890, 10] - lum[890, 265]) > 0.005, 'no sidebar background in the screenshot'

def test_kept_tables_are_rendered_not_printed():
    """A measured table kept in a notebook displays as Markdown (a rendered table on the site), not
    as printed pipes in a text stream."""
    printed = []
    for rel, c in notebook_cells():
        for o in c.get('outputs', []):
            text = ''.join(o.get('text', '')) if o.get('output_type') == 'stream' else ''
            if re.search(r'^\| ?-{3}', text, re.M): printed.append(f"{rel} cell {c.get('id')}")
    assert not printed, f'printed Markdown tables (display them with Markdown): {printed}'


def test_readme_relative_links_resolve():
    """Every relative link of the README (the GitHub page of the project) names a file of the
    repository."""
    text = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    rel = [u.split("#")[0] for u in links if not re.match(r"[a-z]+:", u) and not u.startswith("#")]
    assert rel, "no relative links found: the pattern is wrong"
    missing = sorted({u for u in rel if u and not (ROOT / u).exists()})
    assert not missing, f"README links to files that do not exist: {missing}"


def test_code_lines_fit_the_page():
    """Every code line of the notebooks (the library's source and the site's code) is at most 100
    characters, so it fits the page without scrolling."""
    long = [
        f"{rel} cell {c.get('id')}: {len(l)} characters"
        for rel, c in notebook_cells() if c['cell_type'] == 'code'
        for l in ''.join(c['source']).split('\n') if len(l) > 100]
    assert not long, f'code lines longer than 100 characters: {long}'


def test_measurements_are_not_run_by_nbdev_docs():
    """nbdev's docs build runs every cell that holds an import (or show_doc, or an export), whatever
    its flags: a `slow` or `cuda` cell that did would rerun a measurement (hours, or a GPU) in
    `nbdev_docs`. Their imports sit in a plain cell before them."""
    from execnb.nbio import NbCell
    from nbdev.config import get_config
    from nbdev.process import extract_directives
    from nbdev.processors import _do_eval
    flags = set(get_config(path=ROOT).get('tst_flags', '').split())  # slow, cuda
    assert flags, 'settings.ini names no tst_flags'
    run = []
    for rel, c in notebook_cells():
        if c['cell_type'] != 'code': continue
        src = ''.join(c['source'])
        cell = NbCell(0, dict(c, source=src))
        cell.directives_ = extract_directives(cell)  # as nbdev's docs build reads a cell
        if flags & set(cell.directives_) and _do_eval(cell): run.append(f"{rel} cell {c.get('id')}")
    assert not run, f'measurement cells nbdev_docs would run: {run}'


def test_notebooks_are_small():
    """No notebook carries a history of outputs: each is under 300 KB (plots of the results journal
    are PNG files beside its pages, `nbs/results/img/`)."""
    big = [f"{p.relative_to(NBS)}: {p.stat().st_size // 1024} KB" for p in NBS.rglob('*.ipynb')
           if p.stat().st_size > 300_000]
    assert not big, f'notebooks over 300 KB: {big}'


def test_readme_is_a_front_page():
    """README.md is a front page: at most ~150 lines of ordinary length, one results table per
    machine kind, a link to the results journal, and where to start reading."""
    text = (ROOT/'README.md').read_text(encoding='utf-8')
    lines = text.splitlines()
    assert len(lines) <= 160, f'README.md has {len(lines)} lines'
    # as read: a link's target does not count (nbdev links every API name to its page)
    shown = [re.sub(r'\]\([^)]*\)', ']', l) for l in lines]
    long = [l[:60] for l in shown if len(l) > 120 and not l.startswith('|')]
    assert not long, f'README lines over 120 characters as read: {long}'
    for need in ('## Quick start', '## Results', '## Where to start reading',
                 'results/index.ipynb'):
        assert need in text, f'README.md lacks {need!r}'


def test_images_and_raw_results_resolve(site):
    """Every picture and raw-results link of the site's pages resolves to a file of the site (the
    journal's plots are PNG files beside its pages, copied there by the build)."""
    docs, missing, seen = site/'_docs', [], 0
    for page in docs.rglob('*.html'):
        text = page.read_text(encoding='utf-8')
        urls = re.findall(r'<img[^>]*\bsrc="([^"]+)"', text)
        for url in urls + re.findall(r'href="([^"#]+\.jsonl?)"', text):
            if url.startswith(('data:', 'http:', 'https:')): continue
            seen += 1
            if not (page.parent/url).is_file(): missing.append(f'{page.relative_to(docs)}: {url}')
    assert seen, 'no local image or raw-results link found: the pattern is wrong'
    assert not missing, f'unresolved: {missing[:10]}'
