"""Integration checks for chapter 01 (msllm-clean) on inputs none of the notebook's examples use."""
import json, subprocess, sys, textwrap
from pathlib import Path
import pytest
import msllm_nb.corpus.clean as C

BIN = Path(sys.executable).parent


def run_clean(*args):
    return subprocess.run([str(BIN / 'msllm-clean'), *map(str, args)], capture_output=True, text=True)


@pytest.fixture
def messy(tmp_path):
    d = tmp_path / 'in'; d.mkdir()
    (d / 'zh_gbk.txt').write_bytes('今天天气很好，我们去公园散步吧。\r\n\r\n明天也许会下雨，记得带伞。'.encode('gb18030'))
    (d / 'en_mixed_newlines.txt').write_bytes(b'First paragraph line one\rline two\r\n\r\nSecond paragraph with\nsome more words here.\n')
    (d / 'broken.txt').write_bytes(b'valid start \xff\xfe\xfd broken bytes in the middle of this line\n')
    (d / 'image.png').write_bytes(b'\x89PNG\r\n\x1a\n' + bytes(range(256)) * 8)
    (d / 'empty.jsonl').write_bytes(b'')
    (d / 'docs.jsonl').write_text(json.dumps({'body': 'A document with its text under another field name, long enough.'}) + '\n{oops\n')
    (d / 'page.html').write_text('<html><head><script>var x=1;</script></head><body><h1>Title</h1><p>Fish &amp; chips &mdash; a classic dish of the British Isles.</p></body></html>')
    (d / 'tool.py').write_text('def f(x):\n    return x  \n\n\n\n\ndef g():\n\tpass\n')
    return d


def test_cli_reports_every_drop_by_reason(messy, tmp_path):
    r = run_clean(messy, '--out', tmp_path / 'out', '--workers', '2', '--json_out')
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep['dropped_docs']['binary_file'] == 1 and rep['dropped_docs']['empty_file'] == 1
    assert rep['dropped_docs']['bad_json'] == 1 and rep['dropped_docs']['no_text_field'] == 1
    assert rep['events']['lines_decoded_gb18030'] == 2 and rep['edits']['bad_bytes_dropped'] == 3
    assert rep['docs_in'] == rep['docs_out'] + sum(rep['dropped_docs'].values())  # every document read is kept or dropped
    out = [json.loads(l) for f in sorted((tmp_path / 'out').glob('clean-*.jsonl')) for l in f.read_text().splitlines()]
    texts = {}
    for o in out: texts.setdefault(Path(o['source'].split(':')[0]).name, []).append(o['text'])
    texts = {k: v[0] if len(v) == 1 else v for k, v in texts.items()}
    assert texts['zh_gbk.txt'] == ['今天天气很好，我们去公园散步吧。', '明天也许会下雨，记得带伞。']
    assert texts['en_mixed_newlines.txt'] == ['First paragraph line one\nline two', 'Second paragraph with\nsome more words here.']
    assert texts['page.html'] == 'Title\n\nFish & chips — a classic dish of the British Isles.'
    assert texts['tool.py'] == 'def f(x):\n    return x  \n\n\n\n\ndef g():\n\tpass'  # code as written
    assert texts['broken.txt'] == 'valid start broken bytes in the middle of this line'  # 3 bad bytes dropped, counted
    assert any('broken.txt:1' in e for e in rep['examples']['bad_bytes_dropped'])


def test_text_field_and_parquet(tmp_path):
    import pyarrow as pa, pyarrow.parquet as pq
    pq.write_table(pa.table({'content': ['Parquet row one has enough text to keep.', None, 'Parquet row three also has enough text.']}), tmp_path / 'en_rows.parquet')
    rep = C.clean_corpus([tmp_path / 'en_rows.parquet'], tmp_path / 'o', workers=1, text_field='content', progress=False)
    assert rep['docs_out'] == 2 and rep['dropped_docs'] == {'no_text_field': 1}
    with pytest.raises(ValueError, match="en_rows.parquet: no column 'text'"):
        C.clean_corpus([tmp_path / 'en_rows.parquet'], tmp_path / 'o2', workers=1, progress=False)


def test_datasets_input_through_the_cli(tmp_path):
    "A `datasets:` input (a local Parquet dataset folder, read offline by datasets.load_dataset) cleaned with files, by the CLI."
    import pyarrow as pa, pyarrow.parquet as pq
    d = tmp_path / 'hub_like' / 'data'; d.mkdir(parents=True)
    rows = ['Dataset row one has plenty of ordinary English words in it.', None, 'Dataset row three is also long enough to keep.']
    pq.write_table(pa.table({'body': rows, 'id': [1, 2, 3]}), d / 'train-00000-of-00001.parquet')
    pq.write_table(pa.table({'body': ['A validation row that is long enough to be kept.'], 'id': [9]}), d / 'validation-00000-of-00001.parquet')
    (tmp_path / 'en_file.txt').write_text('A plain text file paragraph that is long enough to keep.\n')
    spec = f"datasets:{tmp_path / 'hub_like'}"
    r = run_clean(spec, f'{spec}@validation', tmp_path / 'en_file.txt', '--out', tmp_path / 'o', '--text_field', 'body', '--workers', '1', '--json_out')
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep['files'] == 1 and rep['datasets'] == [spec, f'{spec}@validation']
    assert rep['docs_out'] == 4 and rep['dropped_docs'] == {'no_text_field': 1}
    assert any(f'{spec}:row 2' in e for e in rep['examples']['no_text_field'])
    kept = [json.loads(l) for f in sorted((tmp_path / 'o').glob('clean-*.jsonl')) for l in f.read_text().splitlines()]
    assert [k['source'] for k in kept] == [f'{spec}:1', f'{spec}:3', f'{spec}@validation:1', str(tmp_path / 'en_file.txt') + ':1']
    for bad, msg in [((spec,), "no column 'text'"), (('datasets:no-such-org/no-such-dataset',), 'no-such-org/no-such-dataset'),
                     (('datasets:@train',), 'no dataset name')]:
        r = run_clean(*bad, '--out', tmp_path / 'bad', '--workers', '1')
        assert r.returncode == 2 and msg in r.stderr, r.stderr[-2000:]


def test_huge_single_line_in_bounded_memory(tmp_path):
    big = tmp_path / 'en_big.txt'
    with open(big, 'wb') as f:
        f.write(b'A normal first paragraph that should be kept by the cleaner.\n\n')
        for _ in range(100): f.write(b'x' * (1 << 20))  # one 100 MB line
        f.write(b'\n\nA normal last paragraph that should be kept as well.\n')
    code = textwrap.dedent(f'''
        import json, re, msllm_nb.corpus.clean as C
        rep = C.clean_corpus([{str(big)!r}], {str(tmp_path / 'o')!r}, workers=1, progress=False)
        # VmHWM, not ru_maxrss: Linux carries the parent's high-water mark into a child's ru_maxrss across exec
        hwm = int(re.search(r'VmHWM:\\s+(\\d+) kB', open('/proc/self/status').read()).group(1))
        print(json.dumps({{'rss': hwm, 'rep': rep}}))''')
    r = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout.splitlines()[-1])
    assert res['rep']['dropped_lines'] == {'line_too_long': 1} and res['rep']['docs_out'] == 2
    assert res['rss'] < 400 * 1024, f"peak RSS {res['rss'] // 1024} MB while skipping a 100 MB line"


def test_same_output_for_any_worker_count(tmp_path):
    a = C.clean_corpus([C.SAMPLE_DIR / 'zh_classical.jsonl', C.SAMPLE_DIR / 'web_email'], tmp_path / 'a', workers=1, progress=False)
    b = C.clean_corpus([C.SAMPLE_DIR / 'zh_classical.jsonl', C.SAMPLE_DIR / 'web_email'], tmp_path / 'b', workers=2, batch_docs=7, progress=False)
    assert (tmp_path / 'a' / 'clean-00000.jsonl').read_bytes() == (tmp_path / 'b' / 'clean-00000.jsonl').read_bytes()
    assert a['dropped_docs'] == b['dropped_docs']


def test_t2s_and_config_errors(tmp_path):
    (tmp_path / 'zh_trad.txt').write_text('學而時習之，不亦說乎？有朋自遠方來，不亦樂乎？')
    r = run_clean(tmp_path / 'zh_trad.txt', '--out', tmp_path / 'o', '--t2s', '--workers', '1')
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / 'o' / 'clean-00000.jsonl').read_text())['text'] == '学而时习之，不亦说乎？有朋自远方来，不亦乐乎？'
    (tmp_path / 'rules.yaml').write_text('min_chars: 5\nmin_length: 3\n')
    r = run_clean(tmp_path / 'zh_trad.txt', '--out', tmp_path / 'o', '--config', tmp_path / 'rules.yaml')
    assert r.returncode == 2 and "rules.yaml: unknown cleaning config keys ['min_length']" in r.stderr
    (tmp_path / 'rules.yaml').write_text('min_chars: ten\n')
    r = run_clean(tmp_path / 'zh_trad.txt', '--out', tmp_path / 'o', '--config', tmp_path / 'rules.yaml')
    assert r.returncode == 2 and "key min_chars: 'ten' is not a int" in r.stderr and 'Traceback' not in r.stderr
    r = run_clean(tmp_path / 'missing_dir', '--out', tmp_path / 'o')
    assert r.returncode == 2 and 'missing_dir: no such file or directory' in r.stderr


@pytest.mark.slow
def test_sample_corpus_rebuilds_byte_for_byte(tmp_path):
    "Provenance: the committed sample is exactly what the builder cuts from the pinned registry packages."
    r = subprocess.run([sys.executable, str(C.SAMPLE_DIR.parent / 'build_sample.py'), str(tmp_path / 's')], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    ours = {p.relative_to(C.SAMPLE_DIR): p.read_bytes() for p in C.SAMPLE_DIR.rglob('*') if p.is_file()}
    built = {p.relative_to(tmp_path / 's'): p.read_bytes() for p in (tmp_path / 's').rglob('*') if p.is_file()}
    assert ours.keys() == built.keys() and all(ours[k] == built[k] for k in ours)


def test_forked_and_spawned_workers_write_the_same(tmp_path):
    "A plain process forks its workers (no start-up); a notebook or a MindSpore process spawns them: same bytes either way."
    code = textwrap.dedent(f'''
        import json, msllm_nb.corpus.clean as C
        ins = [C.SAMPLE_DIR / 'zh_news.jsonl', C.SAMPLE_DIR / 'web_email', C.SAMPLE_DIR / 'en_wiki.jsonl']
        how = [C.start_method()]
        for m in ('fork', 'spawn'):
            C.start_method = lambda: m  # what clean_corpus asks
            C.clean_corpus(ins, {str(tmp_path)!r} + '/' + m, workers=2, batch_docs=13, progress=False)
        print(json.dumps(how))''')
    r = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    assert json.loads(r.stdout.splitlines()[-1]) == ['fork']
    fork, spawn = [sorted((tmp_path / m).glob('clean-*.jsonl')) for m in ('fork', 'spawn')]
    assert fork and [p.read_bytes() for p in fork] == [p.read_bytes() for p in spawn]
    assert json.loads((tmp_path / 'fork' / 'report.json').read_text()) == json.loads((tmp_path / 'spawn' / 'report.json').read_text())
    assert C.start_method() == 'spawn'  # this pytest process has MindSpore loaded (conftest)


def test_sources_keep_true_line_numbers_after_a_dropped_line(tmp_path):
    "A JSON line and a text paragraph after an over-long line are named by their real line numbers."
    (tmp_path / 'en_a.jsonl').write_bytes(b'{"text": "' + b'x' * 5000 + b'"}\n{"text": "The second line of this file is a fine document."}\n')
    (tmp_path / 'en_b.txt').write_bytes(b'y' * 5000 + b'\n\nA paragraph on the third line of this file, long enough.\n')
    rep = C.clean_corpus([tmp_path / 'en_a.jsonl', tmp_path / 'en_b.txt'], tmp_path / 'o', workers=2, max_line_bytes=1000, progress=False)
    kept = [json.loads(l) for l in (tmp_path / 'o' / 'clean-00000.jsonl').read_text().splitlines()]
    assert [k['source'] for k in kept] == [f"{tmp_path / 'en_a.jsonl'}:2", f"{tmp_path / 'en_b.txt'}:3"]
    assert rep['dropped_lines'] == {'line_too_long': 2}


def test_a_hub_dataset_from_the_datasets_cache_offline(tmp_path):
    "`datasets:ORG/NAME` of a hub dataset downloaded before, with no network: the streaming load fails, the cached Arrow files are read."
    import os
    env = {**os.environ, 'HF_HOME': str(tmp_path / 'hf'), 'HF_DATASETS_OFFLINE': '1', 'HF_HUB_OFFLINE': '1'}
    # The cache as a hub download leaves it (datasets/ORG___NAME/CONFIG/VERSION/COMMIT/), written by datasets' own Parquet
    # builder from a local file: nothing is downloaded, here or in the test.
    make = textwrap.dedent(f'''
        import glob, shutil, pyarrow as pa, pyarrow.parquet as pq
        from datasets.packaged_modules.parquet.parquet import Parquet
        pq.write_table(pa.table({{'text': ['Cached hub row one has enough words to keep.', None, 'Cached hub row three is also long enough.']}}),
                       {str(tmp_path / 'train.parquet')!r})
        Parquet(data_files={{'train': {str(tmp_path / 'train.parquet')!r}}}, repo_id='someorg/tiny_corpus', dataset_name='tiny_corpus',
                config_name='default', hash='0f1e2d3c4b5a69788796a5b4c3d2e1f001234567').download_and_prepare()
        root = {str(tmp_path / 'hf' / 'datasets' / 'someorg___tiny_corpus')!r}
        shutil.move(glob.glob(root + '/default-*')[0], root + '/default')  # the config name a hub download has
        import os, sys; sys.stdout.flush(); os._exit(0)  # done: under load, a thread datasets leaves behind can abort the interpreter's exit''')
    r = subprocess.run([sys.executable, '-c', make], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    r = subprocess.run([str(BIN / 'msllm-clean'), 'datasets:someorg/tiny_corpus', '--out', str(tmp_path / 'o'), '--workers', '2', '--json_out'],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    rep = json.loads(r.stdout)
    assert rep['docs_out'] == 2 and rep['dropped_docs'] == {'no_text_field': 1} and rep['datasets'] == ['datasets:someorg/tiny_corpus']
    kept = [json.loads(l) for l in (tmp_path / 'o' / 'clean-00000.jsonl').read_text().splitlines()]
    assert [(k['source'], k['text']) for k in kept] == [('datasets:someorg/tiny_corpus:1', 'Cached hub row one has enough words to keep.'),
                                                        ('datasets:someorg/tiny_corpus:3', 'Cached hub row three is also long enough.')]
    r = subprocess.run([str(BIN / 'msllm-clean'), 'datasets:someorg/not_cached', '--out', str(tmp_path / 'o2')], capture_output=True, text=True, env=env)
    assert r.returncode == 2 and 'datasets:someorg/not_cached' in r.stderr, r.stderr[-2000:]


def test_a_worker_that_dies_is_an_error_not_a_hang(tmp_path):
    "A worker killed mid-run (the kernel's OOM killer, say) stops msllm-clean with an error instead of a wait for ever."
    code = textwrap.dedent(f'''
        import os, msllm_nb.corpus.clean as C
        def die(args): os._exit(9)  # what a killed worker looks like to the parent
        C._clean_batch = die
        try: C.clean_corpus([C.SAMPLE_DIR / 'zh_news.jsonl'], {str(tmp_path / 'o')!r}, workers=2, progress=False)
        except Exception as e: print(type(e).__name__, e)''')
    r = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.startswith('RuntimeError clean_corpus: a worker process died (killed for memory'), (r.stdout, r.stderr[-2000:])


def test_a_worker_killed_while_its_next_batch_is_being_sent_is_an_error_not_a_hang():
    """The worker dies while this process is still writing it a batch bigger than a pipe holds: on Python before 3.11.5
    (CPython gh-94777) the pool's shutdown then waited for ever on the half-written pipe. Deterministic with one worker;
    a hang prints every thread's stack (faulthandler) instead of waiting out the timeout."""
    code = textwrap.dedent('''
        import faulthandler, os, time, multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor
        from concurrent.futures.process import BrokenProcessPool
        import msllm_nb.corpus.clean as C
        faulthandler.dump_traceback_later(60, exit=True)
        def die(x): time.sleep(0.3); os._exit(9)
        pool = ProcessPoolExecutor(1, mp_context=mp.get_context('fork'))
        try: list(C.ordered_bounded_map(pool, die, (b'x' * (4 << 20) for _ in range(4)), 4))
        except BrokenProcessPool: print('broken')
        finally: pool.shutdown(wait=True, cancel_futures=True)
        print('shut down')''')
    r = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.split() == ['broken', 'shut', 'down'] and not r.stderr, (r.stdout, r.stderr[-3000:])


# Issue: cleaning that never corrupts what it keeps. Each test is a small hand-made input that the earlier cleaner got wrong.

def _kept(out):
    return [json.loads(l) for f in sorted(Path(out).glob('clean-*.jsonl')) for l in f.read_text().splitlines()]


def test_angle_brackets_that_are_not_markup_survive(tmp_path):
    (tmp_path / 'en_manual.txt').write_text(
        'Run cp <source> <dest> to copy a file, and std::vector<int> v to hold numbers.\n'
        'Write to <alice at example.org> or set pastetoggle=<f2> in your vimrc file.\n'
        'Some <b>bold</b> words and a <a href="https://x.org">link</a> from a scraped page.\n')
    rep = C.clean_corpus([tmp_path], tmp_path / 'o', workers=1, progress=False)
    text = _kept(tmp_path / 'o')[0]['text']
    for keep in ('cp <source> <dest> to copy', 'std::vector<int> v', '<alice at example.org>', 'pastetoggle=<f2> in'):
        assert keep in text, (keep, text)
    assert 'Some bold words and a link from' in text and '<b>' not in text
    assert rep['edits']['html_tags_removed'] == 4 and 'en_manual.txt' in rep['examples']['html_tags_removed'][0]


def test_man_pages_become_text(tmp_path):
    import gzip
    page = (r'.TH CAT 1 "2024" "coreutils"' '\n.SH NAME\ncat \\- concatenate files and print on the standard output\n'
            '.SH DESCRIPTION\nConcatenate FILE(s) to standard output.\nWith no FILE, or when FILE is\n.BR \\- ,\nread standard input.\n'
            '.TP\n\\fB\\-A\\fR, \\fB\\-\\-show\\-all\\fR\nequivalent to \\fB\\-vET\\fR\n')
    (tmp_path / 'cat.1').write_text(page)
    zh = '.TH LS 1\n.SH 名称\nls \\- 列出目录内容\n.SH 描述\n列出关于\n文件的信息，默认为\n当前目录。\n'
    (tmp_path / 'zh_CN').mkdir(); (tmp_path / 'zh_CN' / 'ls.1.gz').write_bytes(gzip.compress(zh.encode()))
    r = run_clean(tmp_path, '--out', tmp_path / 'o', '--workers', '1', '--json_out')
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    kept = {Path(k['source']).name: k for k in _kept(tmp_path / 'o')}
    en, zh_text = kept['cat.1']['text'], kept['ls.1.gz']['text']
    assert 'Concatenate FILE(s) to standard output. With no FILE, or when FILE is -, read standard input.' in en
    assert '-A, --show-all\n\nequivalent to -vET' in en
    assert '列出关于文件的信息，默认为当前目录。' in zh_text and kept['ls.1.gz']['domain'] == 'zh'
    for mark in ('.TH', '.SH', '.TP', '.BR', '\\f', '\\-'): assert mark not in en + zh_text, mark
    assert rep['events']['man_pages_converted'] == 2 and rep['edits']['troff_requests_removed'] == 7  # 2 × .TH, 4 × .SH, .TP
    assert 'man pages (troff' in run_clean('--help').stdout


def test_damaged_utf8_is_repaired_not_misread(tmp_path):
    cut = '库'.encode()[:2]
    (tmp_path / 'en_notes.txt').write_bytes(b'We tried the new ' + cut + b' library today and it works well.\n')
    (tmp_path / 'zh_short.txt').write_bytes('这是一个短小的文档'.encode() + b'\xff\xfe' + '但它是完整的。'.encode() + b'\n')
    (tmp_path / 'zh_gbk.txt').write_bytes('这是用国标编码写成的一段中文。'.encode('gb18030') + b'\n')
    (tmp_path / 'en_fffd.jsonl').write_text(json.dumps({'text': 'A longer record that arrived from upstream with one \ufffd replacement character inside it, in about a hundred and thirty characters.'}) + '\n'
                                           + json.dumps({'text': 'Short \ufffd\ufffd and broken.'}) + '\n')
    rep = C.clean_corpus([tmp_path], tmp_path / 'o', workers=1, progress=False)
    texts = {Path(k['source'].split(':')[0]).name: k['text'] for k in _kept(tmp_path / 'o')}
    assert texts['en_notes.txt'] == 'We tried the new library today and it works well.'  # not 'the new 涓 library'
    assert texts['zh_short.txt'] == '这是一个短小的文档但它是完整的。'  # kept, not dropped as garbled
    assert texts['zh_gbk.txt'] == '这是用国标编码写成的一段中文。'
    assert texts['en_fffd.jsonl'] == 'A longer record that arrived from upstream with one replacement character inside it, in about a hundred and thirty characters.'
    assert rep['dropped_docs'] == {'garbled': 1}  # U+FFFD are removed from what is kept, and still count towards the garbled rule
    assert not any('\ufffd' in t for t in texts.values())
    assert rep['edits']['bad_bytes_dropped'] == 4 and rep['edits']['replacement_chars_removed'] == 1
    assert rep['events']['lines_decoded_gb18030'] == 1


def test_code_is_kept_byte_for_byte(tmp_path):
    src = 'DOC = """a\n\n\n\nb   \n\t"""  \r\n\r\n\r\n\r\ndef f():\n    return \'x  y\'\t\n'
    (tmp_path / 'm.py').write_bytes(src.encode())
    C.clean_corpus([tmp_path], tmp_path / 'o', workers=1, progress=False)
    assert _kept(tmp_path / 'o')[0]['text'] == src.replace('\r\n', '\n').rstrip('\n')  # only line ends (and invisible characters)


def test_html_line_wraps_inside_cjk_text_are_joined(tmp_path):
    (tmp_path / 'zh_manual.html').write_text('<html><body><p>如果你在任何类 Unix\n系统中使用过命令行，(青木\n修) 的书\n会很有帮助。</p>'
                                              '<p>An English paragraph\nwrapped by the source.</p></body></html>')
    C.clean_corpus([tmp_path], tmp_path / 'o', workers=1, progress=False)
    assert _kept(tmp_path / 'o')[0]['text'] == '如果你在任何类 Unix 系统中使用过命令行，(青木修) 的书会很有帮助。\n\nAn English paragraph wrapped by the source.'


def test_fortune_files_are_split_at_their_separators(tmp_path):
    (tmp_path / 'zh_fortunes').write_text('天行健，君子以自强不息。\n%\n地势坤，君子以厚德载物。\n\n出自《周易》的象传\n%\n学而不思则罔，思而不学则殆。\n')
    r = run_clean(tmp_path / 'zh_fortunes', '--out', tmp_path / 'o', '--workers', '1', '--json_out')
    rep = json.loads(r.stdout)
    assert [k['text'] for k in _kept(tmp_path / 'o')] == ['天行健，君子以自强不息。', '地势坤，君子以厚德载物。\n\n出自《周易》的象传', '学而不思则罔，思而不学则殆。']
    assert rep['events'] == {'files_split_at_percent_lines': 1}
    r = run_clean(tmp_path / 'zh_fortunes', '--out', tmp_path / 'o2', '--workers', '1', '--record_separator', 'blank', '--json_out')
    assert json.loads(r.stdout)['docs_out'] == 2  # as blank-line paragraphs, the % lines inside them
    r = run_clean(tmp_path / 'zh_fortunes', '--out', tmp_path / 'o3', '--record_separator', 'semicolon')
    assert r.returncode == 2 and 'semicolon' in r.stderr


def test_counts_add_up_and_an_empty_input_is_an_error(tmp_path):
    d = tmp_path / 'in'; d.mkdir()
    (d / 'empty.txt').write_bytes(b''); (d / 'blob.bin').write_bytes(bytes(range(256)) * 4)
    r = run_clean(d, '--out', tmp_path / 'o')
    assert r.returncode == 1 and r.stderr.strip().splitlines()[-1] == f'msllm-clean: {d}: no usable document in 2 files (1 binary_file, 1 empty_file)'
    (tmp_path / 'none').mkdir()
    r = run_clean(tmp_path / 'none', '--out', tmp_path / 'o_none')  # a folder with no file: the input named is wrong, nothing is written
    assert r.returncode == 2 and 'none: no input files found' in r.stderr and not (tmp_path / 'o_none').exists()
    (d / 'en_a.txt').write_text('A paragraph long enough to be kept by every rule here.\n\nshort\n')
    (d / 'en_b.jsonl').write_text('{"text": "Another document long enough to be kept by the rules."}\nnot json\n{"body": 1}\n')
    r = run_clean(d, '--out', tmp_path / 'o', '--json_out')
    rep = json.loads(r.stdout)
    assert rep['docs_in'] == 7 and rep['docs_out'] == 2 and rep['docs_in'] == rep['docs_out'] + sum(rep['dropped_docs'].values())


def test_code_blocks_of_an_html_manual_keep_their_indentation(tmp_path):
    (tmp_path / 'guide.html').write_text('<html><body><h1>Guide</h1><p>Loops   look\nlike this in the language:</p>'
                                         '<pre>for i in range(3):\n    if i &gt; 0:\n        print(i,  "cookie")\n</pre>'
                                         '<p>The entity &amp;lt; is written as text here.</p></body></html>')
    C.clean_corpus([tmp_path], tmp_path / 'o', workers=1, progress=False)
    assert _kept(tmp_path / 'o')[0]['text'] == ('Guide\n\nLoops look like this in the language:\n\n'
                                                'for i in range(3):\n    if i > 0:\n        print(i,  "cookie")\n\n'
                                                'The entity &lt; is written as text here.')  # no boilerplate rule inside code


def test_piped_into_head_the_report_stops_quietly_and_the_files_are_complete(messy, tmp_path):
    "`msllm-clean ... --json_out | head`: the reader leaves before the report is printed; no traceback, nothing lost."
    for flags in (['--json_out'], []):
        out = tmp_path / f'out{len(flags)}'
        p = subprocess.Popen([str(BIN / 'msllm-clean'), str(messy), '--out', str(out), *flags], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        p.stdout.close()  # the reader is gone before anything is printed (head after its lines, or a closed terminal)
        err = p.stderr.read().decode(); p.wait()
        assert 'Traceback' not in err and 'BrokenPipeError' not in err, err[-2000:]
        rep = json.loads((out / 'report.json').read_text())
        kept = [l for f in sorted(out.glob('clean-*.jsonl')) for l in f.read_text().splitlines()]
        assert rep['docs_out'] == len(kept) > 0


# ---- bad input: one line naming the flag, key or file, exit 2, nothing written (issue 56)

from train_helpers import run_raw as _raw, one_line as _one_line  # noqa: E402  (shared by the CLI tests)


@pytest.mark.parametrize('flag, value', [('--workers', '0'), ('--workers', '-1'), ('--workers', 'nan'), ('--workers', '1.5'),
                                         ('--max_line_bytes', '0'), ('--max_line_bytes', 'inf'), ('--max_line_bytes', 'abc')])
def test_out_of_range_flags_are_one_line(tmp_path, flag, value):
    (tmp_path / 'en_a.txt').write_text('A paragraph long enough to be kept by every rule here.\n')
    _one_line(_raw(BIN / 'msllm-clean', tmp_path / 'en_a.txt', '--out', tmp_path / 'o', flag, value), 2, flag)
    assert not (tmp_path / 'o').exists()


@pytest.mark.parametrize('yaml, names', [('max_garbled_ratio: .nan\n', ['max_garbled_ratio']), ('min_chars: -4\n', ['min_chars']),
                                         ('max_chars: 0\n', ['max_chars']), ('near_dup_threshold: 2\n', ['near_dup_threshold']),
                                         ('min_script_ratio: {zh: 5}\n', ['min_script_ratio.zh']), ('rules: [length, nosuch]\n', ['rules', 'nosuch']),
                                         ('boilerplate: ["(unclosed"]\n', ['boilerplate', '(unclosed']), (b'\xff: 1\n', ['not UTF-8'])])
def test_config_values_out_of_range_are_one_line(tmp_path, yaml, names):
    (tmp_path / 'en_a.txt').write_text('A paragraph long enough to be kept by every rule here.\n')
    c = tmp_path / 'c.yaml'; c.write_bytes(yaml) if isinstance(yaml, bytes) else c.write_text(yaml)
    _one_line(_raw(BIN / 'msllm-clean', tmp_path / 'en_a.txt', '--out', tmp_path / 'o', '--config', c), 2, '--config', c, *names)
    assert not (tmp_path / 'o').exists()


def test_odd_paths_are_one_line(tmp_path):
    (tmp_path / 'en_a.txt').write_text('A paragraph long enough to be kept by every rule here.\n')
    f = tmp_path / 'en_a.txt'
    for args, names in [((f, '--out', f), ['--out', 'a file, not a folder']), ((f, '--out', f / 'sub'), ['--out', 'is a file, not a folder']),
                        ((f, '--out', tmp_path / 'o', '--config', tmp_path), ['--config', 'a folder']),
                        ((f, '--out', tmp_path / 'o', '--config', tmp_path / 'nope.yaml'), ['--config', 'no such']),
                        ((f, '--out', tmp_path / 'o', '--source_root', f), ['--source_root']),
                        ((tmp_path / 'nope', '--out', tmp_path / 'o'), ['nope: no such file or directory'])]:
        _one_line(_raw(BIN / 'msllm-clean', *args), 2, *names)
    assert sorted(p.name for p in tmp_path.iterdir()) == ['en_a.txt']
