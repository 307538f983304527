import numpy as np
import pytest
from scipy.stats import spearmanr

from bench.cli import main
from bench.encode.encoder import Encoder
from bench.encode.loading import save_encoder
from bench.evaluate.suites import EvalContext, parse_suites
from results_db import ResultsDB
from tests.conftest import TOY_PAIRS, write_sts

PAIRS = TOY_PAIRS[:6]


@pytest.fixture()
def data_dir(tmp_path):
    write_sts(tmp_path / "data" / "sts" / "stsb-test.tsv", PAIRS)
    write_sts(tmp_path / "data" / "sts" / "sts12.tsv", PAIRS[::-1])
    return tmp_path / "data"


def test_sts_score_is_spearman_of_cosines(tiny_model_dir, data_dir):
    enc = Encoder.load(str(tiny_model_dir), use_cache=False)
    (suite, attacked), = parse_suites("sts:stsb")
    rec, = suite.evaluate(enc, "stsb", EvalContext(data_dir=str(data_dir)))
    # Hand computation: cosine of the pair embeddings, Spearman against gold, x100.
    e1 = enc.encode([p[0] for p in PAIRS])
    e2 = enc.encode([p[1] for p in PAIRS])
    cos = [float(np.dot(a, b) / np.linalg.norm(a) / np.linalg.norm(b)) for a, b in zip(e1, e2)]
    expected = spearmanr(cos, [p[2] for p in PAIRS]).statistic * 100
    assert not attacked and rec.metric == "spearman" and rec.n == len(PAIRS)
    assert rec.value == pytest.approx(expected, abs=1e-4)
    assert rec.items.aggregate == "spearman" and rec.items.gold == [p[2] for p in PAIRS]


def test_eval_cli_records_attacked_and_hits_the_cache(tiny_model_dir, data_dir, tmp_path, capsys, monkeypatch):
    db_path = tmp_path / "r.sqlite"
    args = ["eval", "--model", str(tiny_model_dir), "--suite", "sts:stsb,sts12@elong", "--elong", "2,4,8,rand", "--max-len", "32",
            "--data-dir", str(data_dir), "--db", str(db_path)]  # fmt: skip
    calls = []
    original = Encoder._forward

    def counting_forward(self, batch):
        calls.append(batch["input_ids"].shape[0])
        return original(self, batch)

    monkeypatch.setattr(Encoder, "_forward", counting_forward)
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "change(elong-rand)" in out and "elong-8" in out
    first = len(calls)
    assert first > 0
    scores = ResultsDB(db_path).scores()
    assert set(scores["variant"]) == {"clean", "elong-2", "elong-4", "elong-8", "elong-rand"}
    assert set(scores["dataset"]) == {"stsb", "sts12"}
    # The same evaluation again (--rerun: scored in a new row, not the finished one reused): every text is in the
    # embedding cache, the model is never called.
    assert main(args + ["--rerun"]) == 0
    assert len(calls) == first
    runs = ResultsDB(db_path).runs()
    assert runs["status"].tolist() == ["finished", "finished"]
    assert runs["config_hash"].nunique() == 1 and runs["code_version"].iloc[0]


def test_bad_input_gives_one_clear_error_and_keeps_earlier_runs(tiny_model_dir, data_dir, tmp_path, capsys):
    db_path = tmp_path / "r.sqlite"
    ok = ["eval", "--model", str(tiny_model_dir), "--suite", "sts:stsb", "--data-dir", str(data_dir), "--db", str(db_path)]
    assert main(ok) == 0
    before = ResultsDB(db_path).scores()

    assert main(["eval", "--model", str(tiny_model_dir), "--suite", "nosuch", "--db", str(db_path)]) == 2
    assert "unknown suite 'nosuch'" in capsys.readouterr().err
    assert main(["eval", "--model", str(tmp_path / "no-model"), "--suite", "sts", "--db", str(db_path)]) == 2
    assert "no-model" in capsys.readouterr().err

    # A corrupt file fails its dataset; the run is marked failed, datasets finished before it stay scored.
    (data_dir / "sts" / "sts12.tsv").write_text("sentence1\tsentence2\tscore\na\tb\tnot-a-number\n")
    bad = ["eval", "--model", str(tiny_model_dir), "--suite", "sts:stsb,sts12", "--data-dir", str(data_dir), "--db", str(db_path)]
    assert main(bad) == 2
    assert "sts12.tsv:2: score 'not-a-number'" in capsys.readouterr().err
    db = ResultsDB(db_path)
    runs = db.runs()
    assert runs["status"].tolist() == ["finished", "failed"]
    failed_id = int(runs["id"].iloc[-1])
    assert db.scores([failed_id])["dataset"].tolist() == ["stsb"]
    # The earlier run is untouched.
    first = db.scores([int(runs["id"].iloc[0])])
    assert first[["dataset", "value"]].equals(before[["dataset", "value"]])


def test_saved_encoder_round_trips_and_loads_in_sentence_transformers(tiny_model_dir, tmp_path):
    enc = Encoder.load(str(tiny_model_dir), pooling="cls", use_cache=False)
    out = save_encoder(enc.model, enc.tokenizer, tmp_path / "saved", pooling="cls", max_len=64)
    again = Encoder.load(str(out), use_cache=False)
    assert again.pooling == "cls"  # taken from the folder's 1_Pooling config
    texts = ["a man plays the guitar .", "dogs bark ."]
    np.testing.assert_allclose(enc.encode(texts), again.encode(texts), atol=1e-5)
    st = pytest.importorskip("sentence_transformers")
    model = st.SentenceTransformer(str(out), device="cpu")
    np.testing.assert_allclose(model.encode(texts, normalize_embeddings=True), again.encode(texts), atol=1e-4)
