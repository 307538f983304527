"""`bench claim` on tiny settings: the runs are sweep points, a second call trains nothing and prints the same
verdicts, the verdicts are stored and shown by `bench results`; bad claim files are one clear line; every shipped
claim file loads and expands at each of its scales offline."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from bench.claim.run import arms
from bench.claim.spec import load_claim
from bench.cli import main
from bench.runtime.errors import ConfigError
from results_db import ResultsDB
from tests.conftest import child_process_workdir

REPO = Path(__file__).resolve().parent.parent
TEXTS = [f"Sentence {i} talks about subject {i % 6}. A second sentence adds detail number {i}." for i in range(40)]
STS = [(f"A man number {i} is playing a guitar {i % 3}.", f"A man plays the guitar {i % 4}.", float(i % 5)) for i in range(12)]

pytestmark = pytest.mark.usefixtures("one_thread")


def write_claim(path: Path, model: Path, body: str = "") -> Path:
    path.write_text(f"""
[claim]
name = "tiny"
statement = "laser3-self beats the untrained model and word deletion"
treatment = "laser3-self"
seeds = [0, 1, 2]
suite = "sts"
metric = "spearman"
[[comparator]]
name = "vanilla"
role = "reference"
[[comparator]]
name = "no-elongation"
method = "laser3-self"
hp = ["m_mode=none"]
[[test]]
dataset = "stsb"
variant = "clean"
direction = "higher"
[[test]]
dataset = "stsb"
variant = "elong-2"
direction = "not-lower"
margin = 1.0
[scale.cpu]
backbone = "{model}"
corpus = "corpus.txt"
budget = "steps=2"
batch_size = 4
max_len = 32
suite = "sts:stsb@elong"
elong = "2"
eval_max_len = 32
data_dir = "data"
backend = "torch"
{body}""")
    return path


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    return child_process_workdir(tmp_path, monkeypatch, STS, TEXTS)


def _verdict_block(out: str) -> str:
    return out[out.index("minus each comparator"):out.index("\n(")] if "\n(" in out else out[out.index("minus each comparator"):]


def test_claim_runs_missing_runs_once_then_reuses_them_and_stores_its_verdicts(workdir, tiny_model_dir, capsys):
    path = write_claim(workdir / "tiny.toml", tiny_model_dir)
    db = workdir / "r.sqlite"
    code = main(["claim", str(path), "--db", str(db), "--jobs", "2", "--retries", "0"])
    first = capsys.readouterr().out
    assert code == 0, first
    assert "7 runs: 0 already in the database (reused), 7 to run" in first
    runs = ResultsDB(db).runs()
    assert len(runs) == 7 and set(runs["status"]) == {"finished"}
    assert sorted(runs["method"]) == ["laser3-self"] * 6 + ["vanilla"]  # treatment and no-elongation, 3 seeds each
    rows = [ln for ln in first.splitlines() if ln.lstrip().startswith(("vanilla", "no-elongation"))]
    assert len(rows) == 4  # 2 comparators x 2 tests
    assert all(any(v in ln for v in ("holds", "contradicted", "inconclusive")) for ln in rows)
    assert "1 vs 3" in first and "3 vs 3" in first  # the untrained reference is one run
    assert "claim tiny" in first and "scale cpu" in first

    assert main(["claim", str(path), "--db", str(db)]) == 0
    second = capsys.readouterr().out
    assert "7 runs: 7 already in the database (reused), 0 to run" in second
    assert len(ResultsDB(db).runs()) == 7  # nothing trained or scored again
    assert _verdict_block(second) == _verdict_block(first)  # the same verdicts

    stored = ResultsDB(db).claim_verdicts()
    assert len(stored) == 1 and stored[0]["claim"] == "tiny" and stored[0]["scale"] == "cpu"
    assert {(r["comparator"], r["variant"]) for r in stored[0]["rows"]} == {
        ("vanilla", "clean"), ("no-elongation", "clean"), ("vanilla", "elong-2"), ("no-elongation", "elong-2")}
    assert "the same verdict, on the same runs, is stored already" in second
    assert len(ResultsDB(db).claim_verdicts(latest=False)) == 1  # the same runs, the same verdict: stored once
    assert main(["results", "--db", str(db)]) == 0
    shown = capsys.readouterr().out
    assert "claims" in shown and stored[0]["summary"] in shown


def test_no_run_on_an_empty_database_is_incomplete_and_stores_nothing(workdir, tiny_model_dir, capsys):
    path = write_claim(workdir / "tiny.toml", tiny_model_dir)
    db = workdir / "r.sqlite"
    ResultsDB(db)
    assert main(["claim", str(path), "--db", str(db), "--no-run"]) == 1
    out = capsys.readouterr().out
    assert "INCOMPLETE" in out and "missing" in out
    assert ResultsDB(db).claim_verdicts() == []


@pytest.mark.parametrize("body,message", [
    ('[claim]\ntreatment = "simcse"\nsuite = "sts"\nmetric = "spearman"\nseeds = [0, 1]', "3 or more"),
    ('[claim]\ntreatment = "simcse"\nsuite = "sts"\nmetric = "spearman"\nseeds = [0, 1, 2]\n[[comparator]]\nname = "vanilla"\n'
     '[[test]]\ndataset = "stsb"\nvariant = "clean"\ndirection = "better"', "direction: 'better' is not one of"),
    ('[claim]\ntreatment = "simcse"\nsuite = "sts"\nmetric = "spearman"\nseeds = [0, 1, 2]\n[[comparator]]\nname = "vanilla"\n'
     '[[test]]\ndataset = "stsb"\nvariant = "clean"\ndirection = "higher"\n[scale.cpu]\nseed = 3', "set by the claim"),
    ('[claim]\ntreatment = "simcse"\nsuite = "sts"\nmetric = "spearman"\nseeds = [0, 1, 2]\n[[comparator]]\nname = "vanilla"\n'
     '[[test]]\ndataset = "stsb"\nvariant = "clean"\ndirection = "higher"\nmargin = 1\n[scale.cpu]\nbudget = "steps=2"', "margin is for"),
])  # fmt: skip
def test_bad_claim_files_are_one_clear_error(tmp_path, body, message):
    path = tmp_path / "bad.toml"
    path.write_text(body)
    with pytest.raises(ConfigError, match=message):
        load_claim(path)


BOM = "\ufeff"  # the UTF-8 byte order mark Windows editors start a file with
SMALL_CLAIM = ('[claim]\ntreatment = "simcse"\nsuite = "sts"\nmetric = "spearman"\nseeds = [0, 1, 2]\n[[comparator]]\n'
               'name = "vanilla"\n[[test]]\ndataset = "stsb"\nvariant = "clean"\ndirection = "higher"\n[scale.cpu]\n'
               'budget = "steps=2"\n')  # fmt: skip
SMALL_SWEEP = '[sweep]\nname = "bom"\n[grid]\nmethod = ["simcse"]\n'


def test_claim_and_sweep_files_that_start_with_a_byte_order_mark_load(tmp_path):
    from bench.sweep.spec import load_spec

    claim = tmp_path / "bom-claim.toml"
    claim.write_text(BOM + SMALL_CLAIM, encoding="utf-8")
    assert claim.read_bytes().startswith(b"\xef\xbb\xbf")
    spec = load_claim(claim)
    assert (spec.name, spec.treatment, spec.seeds) == ("bom-claim", "simcse", [0, 1, 2])
    assert spec.scales == {"cpu": {"budget": "steps=2"}}
    sweep = tmp_path / "grid.toml"
    sweep.write_text(BOM + SMALL_SWEEP, encoding="utf-8")
    assert (load_spec(sweep).name, load_spec(sweep).grid) == ("bom", {"method": ["simcse"]})


@pytest.mark.parametrize("kind", ["claim", "sweep"])
@pytest.mark.parametrize("case,message", [
    ("missing", r"file .*nowhere\.toml does not exist"),
    ("folder", r"file .*folder\.toml is a folder; give the \.toml file"),
    ("latin-1", r"file .*latin\.toml is not UTF-8 text \(byte 0xe9 at \d+\)"),
    ("not TOML", r"file .*broken\.toml is not valid TOML: "),
    ("unreadable", r"file .*locked\.toml cannot be read \(Permission denied\); check its permissions"),
])  # fmt: skip
def test_claim_and_sweep_files_that_cannot_be_read_are_the_same_one_line(tmp_path, monkeypatch, kind, case, message):
    from bench.sweep.spec import load_spec

    load = load_claim if kind == "claim" else load_spec
    if case == "missing":
        path = tmp_path / "nowhere.toml"
    elif case == "folder":
        path = tmp_path / "folder.toml"
        path.mkdir()
    elif case == "latin-1":
        path = tmp_path / "latin.toml"
        path.write_bytes('[claim]\nname = "caf\xe9"\n'.encode("latin-1"))
    elif case == "not TOML":
        path = tmp_path / "broken.toml"
        path.write_text("[claim\nname = 1\n")
    else:  # as root a chmod does not stop a read: the refusal the system gives another user, made here
        path = tmp_path / "locked.toml"
        path.write_text(SMALL_SWEEP)

        def refuse(self, *args, **kwargs):
            raise PermissionError(13, "Permission denied", str(self))

        monkeypatch.setattr(type(path), "read_text", refuse)
    with pytest.raises(ConfigError, match=f"^{kind} {message}") as refused:
        load(path)
    assert "\n" not in str(refused.value)
    if kind == "claim" and case == "missing":
        assert str(refused.value).endswith("; the shipped claims are in claims/")


def test_an_unknown_scale_names_the_ones_there(tmp_path, capsys):
    path = write_claim(tmp_path / "tiny.toml", Path("minilm"))
    assert main(["claim", str(path), "--scale", "paper", "--db", str(tmp_path / "r.sqlite")]) == 2
    assert "no scale 'paper'; this claim has cpu" in capsys.readouterr().err


def test_every_shipped_claim_file_expands_at_each_scale_offline():
    files = sorted((REPO / "claims").glob("*.toml"))
    assert {f.stem for f in files} >= {"laser3-length", "simcse-dropout", "crop-scratch", "paser-generative"}
    for f in files:
        spec = load_claim(f)
        assert {"cpu", "paper"} <= set(spec.scales) and len(spec.seeds) >= 3
        assert any(c.role == "control" for c in spec.comparators), f
        assert spec.needs.get("paper"), f  # the paper scale names what it needs beyond this machine
        for scale in spec.scales:
            made = arms(spec, scale)
            assert made[0].name == spec.treatment and all(len(a.points) == (3 if a.trains else 1) for a in made)
    laser = load_claim(REPO / "claims" / "laser3-length.toml")
    paper = laser.scales["paper"]
    assert (paper["batch_size"], paper["max_len"], paper["lr"], paper["backbone"]) == (64, 256, 3e-5, "minilm")
    assert {c.role for c in laser.comparators} == {"reference", "baseline", "control"}
    assert sum(c.role == "control" for c in laser.comparators) >= 2


def test_a_claims_runs_start_one_seed_of_each_arm_at_a_time():
    """Seeds of one method side by side would prepare the same corpus at once (one splits, the others wait): a claim
    starts each arm's first seed, then each arm's second."""
    from bench.claim.run import interleaved

    made = arms(load_claim(REPO / "claims" / "laser3-length.toml"), "cpu")
    order = [(p.method, p.seed) for p in interleaved(made)]
    assert sorted(order) == sorted((p.method, p.seed) for a in made for p in a.points)  # every run, once
    assert [seed for _, seed in order[: len(made)]] == [0] * len(made)  # every arm's first seed before any second
    assert order[0] == ("laser3-self", 0) and order[1][0] == "vanilla" and order[len(made)] == ("laser3-self", 1)


def _store_point_rows(db_path: Path, claim_path: Path, change) -> None:  # noqa: ANN001
    """A finished row for every point of the claim, as `bench run` keys it, each config passed through `change`
    (the hash left as it was, so no point finds its row)."""
    import copy

    spec = load_claim(claim_path)
    db = ResultsDB(db_path)
    for arm in arms(spec, "cpu"):
        for point in arm.points:
            config = change(copy.deepcopy(point.config))
            db.create_run(model=str(point.spec.backbone), method=point.method, config=config,
                          config_hash="0" * 16, status="finished", kind="train")  # fmt: skip
    db.engine.dispose()


def test_no_run_names_the_first_config_field_that_differs_with_both_values(workdir, tiny_model_dir, capsys):
    path = write_claim(workdir / "tiny.toml", tiny_model_dir)
    db = workdir / "r.sqlite"

    def shorter(config):  # noqa: ANN001
        config["eval"]["max_len"] = 16
        return config

    _store_point_rows(db, path, shorter)
    assert main(["claim", str(path), "--db", str(db), "--no-run"]) == 1
    out = capsys.readouterr().out
    lines = [ln for ln in out.splitlines() if ln.startswith("  ") and ": missing (" in ln]
    assert len(lines) == 7, out  # every point of every arm, each with its reason
    assert all(", the closest, has eval.max_len=16, this one asks 32)" in ln for ln in lines), out


def test_no_run_says_when_no_run_of_the_method_exists_or_another_code_version_made_it(workdir, tiny_model_dir, capsys):
    path = write_claim(workdir / "tiny.toml", tiny_model_dir)
    db = workdir / "r.sqlite"

    def older_recipe(config):  # noqa: ANN001
        if "train_recipe" in config:
            config["train_recipe"] = config["train_recipe"] - 1
        return config

    _store_point_rows(db, path, older_recipe)
    con = sqlite3.connect(db)
    con.execute("DELETE FROM runs WHERE method = 'vanilla'")  # the untrained reference: no row of it at all
    con.commit()
    con.close()
    before = db.read_bytes()
    assert main(["claim", str(path), "--db", str(db), "--no-run"]) == 1
    out = capsys.readouterr().out
    assert "vanilla seed 0: missing (no run of vanilla in the database)" in out
    assert "was made by another code version: train_recipe=" in out
    assert db.read_bytes() == before  # --no-run only reads
