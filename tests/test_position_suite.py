"""The position suite (issue 35): the same facts at depths 0, 0.25, 0.5, 0.75 and 1 of a fixed-length context, each
depth scored, and the position sensitivity index; a model that reads only its first k tokens scores 100 exactly at
the depths whose fact it can see and 0 elsewhere."""

from __future__ import annotations

import numpy as np
import pytest

from bench.evaluate.suites.base import EvalContext
from bench.evaluate.suites.needle import FILLER, PASSKEY_LINE, PASSKEY_QUERY, build
from bench.evaluate.suites.position import DEPTHS, PositionSuite, context_length, depth_of, position_sensitivity


class FirstTokens:
    """Reads only the first k tokens of a text (truncation), and of those only the words that are not the passkey
    template's or the filler's: a bag of the token ids left, plus a constant dimension, normalised."""

    def __init__(self, tokenizer, k: int, max_len: int = 130, dim: int = 4096):
        self.tokenizer, self.k, self.max_len, self.dim = tokenizer, k, max_len, dim
        template = " ".join([*FILLER, PASSKEY_LINE, PASSKEY_QUERY]).replace("{name}", "").replace("{key}", "")
        self.stop = set(tokenizer(template, add_special_tokens=False)["input_ids"])

    def seen(self, text: str) -> set[int]:
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"][: self.k]
        return {i for i in ids if i not in self.stop}

    def encode(self, texts, desc: str = "", **_):  # noqa: ANN001, ANN201
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        out[:, 0] = 1.0
        for row, text in enumerate(texts):
            for i in self.seen(text):
                out[row, 1 + i % (self.dim - 1)] = 1.0
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def test_a_model_reading_the_first_k_tokens_scores_exactly_the_depths_it_sees(reference_dir):
    from transformers import AutoTokenizer

    from bench.evaluate.suites.needle import LengthCounter

    tok = AutoTokenizer.from_pretrained(str(reference_dir))
    model = FirstTokens(tok, k=48)
    assert context_length(model) == 128  # LENGTH, within the model's max_len - 2
    records = PositionSuite(("passkey",)).evaluate(model, "passkey", EvalContext(seed=0))
    assert [r.variant for r in records] == ["depth-0", "depth-25", "depth-50", "depth-75", "depth-100"]
    counter = LengthCounter(tok, "t")
    expected = []
    for depth, record in zip(DEPTHS, records):
        data = build("passkey", 128, 0, None, counter, at=depth)
        assert abs(np.mean(data.tokens) - 128) < 8  # a fixed context length at every depth
        assert record.info["depth"] == depth and max(abs(d - depth) for d in record.info["depths"]) < 0.15
        # its fact is seen when the first k tokens hold a piece of its name (what the query asks for)
        found = [bool(model.seen(doc) & model.seen(q)) for doc, q in zip(data.docs, data.queries)]
        expected.append(100.0 * np.mean(found))
        assert record.items.values == [100.0 * f for f in found]  # per query: found -> 100, not found -> 0
        assert record.value == pytest.approx(expected[-1])
    assert expected[0] == 100.0 and expected[-1] == 0.0  # at the start it sees every fact, at the end none
    psi = float(position_sensitivity([r.value for r in records]))
    assert psi == pytest.approx(100.0 * (max(expected) - min(expected)) / max(expected)) and psi == 100.0
    full = FirstTokens(tok, k=1000)  # reads everything: no position effect
    flat = [r.value for r in PositionSuite(("passkey",)).evaluate(full, "passkey", EvalContext(seed=0))]
    assert flat == [100.0] * 5 and float(position_sensitivity(flat)) == 0.0


def test_position_sensitivity_is_the_relative_drop_from_the_best_depth_to_the_worst():
    assert float(position_sensitivity([80.0, 60.0, 40.0, 70.0, 80.0])) == pytest.approx(50.0)
    assert float(position_sensitivity([0.0, 0.0])) == 0.0
    assert np.allclose(position_sensitivity(np.array([[50.0, 25.0], [10.0, 10.0]])), [50.0, 0.0])  # per row
    assert depth_of("depth-25") == 0.25 and depth_of("len-64") is None


def test_depth_variants_order_and_label_on_the_depth_axis():
    from bench.evaluate.attacks import describe_variant, order_variants

    assert order_variants(["depth-100", "depth-0", "depth-50"]) == ["depth-0", "depth-50", "depth-100"]
    described = describe_variant("depth-75")
    assert described.family == "depth" and described.x == 75.0 and described.x_label == "75"


def test_the_packaged_minilm_curve_and_its_index_are_in_bench_results(tmp_path, capsys, reference_dir):
    """bench eval of the packaged MiniLM on the position suite (20 queries a depth), then bench results: one profile
    row per depth on the depth axis, and the PSI of those five scores in the summary."""
    from bench.cli import main
    from results_db import ResultsDB

    db = tmp_path / "r.sqlite"
    assert main(["eval", "--model", "minilm", "--suite", "position:passkey", "--limit", "20", "--backend", "torch",
                 "--db", str(db), "--no-progress"]) == 0  # fmt: skip
    scores = ResultsDB(db).scores().set_index("variant")["value"]
    assert sorted(scores.index) == sorted(f"depth-{d}" for d in (0, 25, 50, 75, 100))
    capsys.readouterr()
    assert main(["results", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    profile = out[out.index("robustness profile"):]
    rows = [ln.split() for ln in profile.splitlines() if " depth-" in ln]
    assert [r[r.index(next(v for v in r if v.startswith("depth-"))) + 1] for r in rows] == ["0", "25", "50", "75", "100"]
    summary = profile[profile.index("robustness summary"):].splitlines()
    header = summary[1].split()
    line = next(ln.split() for ln in summary[2:] if " depth " in f" {ln} ")
    psi = float(position_sensitivity([scores[f"depth-{d}"] for d in (0, 25, 50, 75, 100)]))
    from_right = len(header) - header.index("PSI")  # the dataset's subset label ('(sample of 20 of 50)') has spaces
    assert float(line[len(line) - from_right]) == pytest.approx(psi, abs=0.01)


@pytest.mark.parametrize("max_len", [4, 8, 24])
def test_a_max_len_that_cannot_hold_a_needle_is_refused_not_scored(reference_dir, max_len):
    """At max_len 4 every depth scored 0 and the PSI was 0 ("position does not matter"); at 8 the PSI was 100 from
    truncation alone: a depth whose needle lies past what the model reads is refused, naming the max_len needed."""
    from transformers import AutoTokenizer

    from bench.evaluate.suites.base import SuiteError

    model = FirstTokens(AutoTokenizer.from_pretrained(str(reference_dir)), k=1000, max_len=max_len)
    with pytest.raises(SuiteError, match=rf"position:passkey: the model reads {max_len - 2} tokens \(max_len "
                                         rf"{max_len}\) and the fact lies past them at .*depth-100 \(\d+ of 50 queries\)"
                                         r".* at least \d+ \(--eval-max-len"):  # fmt: skip
        PositionSuite(("passkey",)).evaluate(model, "passkey", EvalContext(seed=0))


def test_bench_eval_at_a_short_max_len_is_one_line_and_stores_no_depth(tmp_path, capsys, reference_dir):
    from bench.cli import main
    from results_db import ResultsDB

    db = tmp_path / "r.sqlite"
    assert main(["eval", "--model", "minilm", "--suite", "position:passkey", "--limit", "5", "--backend", "torch",
                 "--max-len", "8", "--db", str(db), "--no-progress"]) != 0  # fmt: skip
    err = capsys.readouterr().err
    assert "the model reads 6 tokens (max_len 8)" in err and "Traceback" not in err
    assert ResultsDB(db).scores().empty
