"""`flashspec bench` killed (SIGKILL) at random moments and rerun resumes from its journal: the
answers equal an uninterrupted run's, no question is lost or run twice, and nothing is left in the
output folder but the results (issue 67)."""
import json, os, random, signal, subprocess, sys, time

import pytest

from flashspec.target import tiny_llama, tiny_tokenizer


def _setup(d):
    "A 2-layer target and its tokenizer on disk, and 6 one-turn questions in Spec-Bench's form."
    tok = tiny_tokenizer()
    m = tiny_llama(n_layers=2, vocab_size=len(tok), seed=7)
    m.generation_config.eos_token_id = tok.eos_token_id
    m.save_pretrained(d/"m"); tok.save_pretrained(d/"m")
    qs = [dict(question_id=i, category=f"c{i % 3}", turns=[f"w{i} w{i + 3} w{2 * i}"])
          for i in range(6)]
    (d/"q.jsonl").write_text("".join(json.dumps(q) + "\n" for q in qs))


def _cmd(d, out):
    return [sys.executable, "-m", "flashspec", "bench", "--target", str(d/"m"), "--prompts",
            str(d/"q.jsonl"), "--methods", "hf", "ar", "flashspec", "--draft-design", "slice",
            "--draft-layers", "1", "--depth", "2", "--width", "2", "--max-new-tokens", "10",
            "--dtype", "float32", "--out", str(out)]


def _answers(path):
    "Each answer's tokens by (method, question, turn), and how many records there are."
    recs = json.loads(path.read_text())["records"]
    return len(recs), {(r["method"], r["question_id"], r["turn"]): r["tokens"] for r in recs}


def _lines(path):
    try: return path.read_text().count("\n")
    except FileNotFoundError: return 0


def _run(d, out, kills, rng):
    """Run the bench to the end, SIGKILLed `kills` times first: each time once the journal holds a
    random number of the 6 questions (1 to 5; the journal gains a question's 3 answers at once),
    after a random delay (mid-question, or mid-write). Returns the last run and the kills that
    struck a running process."""
    # the kernel off: the processes start in seconds, not after a build (it is not what is tested)
    env = dict(os.environ, FLASHSPEC_CACHE=str(d/"cache"), FLASHSPEC_KERNEL="0")
    journal, struck = out.with_name(out.name + ".journal.jsonl"), 0
    for q in sorted(rng.choices(range(1, 6), k=kills)):
        p = subprocess.Popen(_cmd(d, out), env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        t0 = time.time()
        while p.poll() is None and _lines(journal) < 1 + 3 * q and time.time() - t0 < 300:
            time.sleep(0.05)
        time.sleep(rng.uniform(0, 0.5))
        p.send_signal(signal.SIGKILL); p.wait()
        struck += p.returncode == -signal.SIGKILL
    r = subprocess.run(_cmd(d, out), env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    return r, struck


def _check(tmp_path, kills, seed):
    _setup(tmp_path)
    (tmp_path/"a").mkdir(); (tmp_path/"b").mkdir()
    _run(tmp_path, tmp_path/"a"/"r.json", 0, random.Random(seed))
    r, struck = _run(tmp_path, tmp_path/"b"/"r.json", kills, random.Random(seed))
    assert struck >= 1, "no kill struck a running bench"
    assert _answers(tmp_path/"a"/"r.json") == _answers(tmp_path/"b"/"r.json")
    # the results, the monitor pages; no journal, no temporaries
    assert sorted(os.listdir(tmp_path/"b")) == sorted(os.listdir(tmp_path/"a")), r.stderr[-500:]
    assert not [n for n in os.listdir(tmp_path/"b") if n.startswith(".") or "journal" in n]


def test_bench_killed_and_resumed(tmp_path):
    _check(tmp_path, kills=2, seed=0)


@pytest.mark.slow
def test_bench_killed_often(tmp_path):
    _check(tmp_path, kills=6, seed=1)
