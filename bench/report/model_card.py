"""Model cards: the README.md of a trained encoder folder, written from the run's database row.

It follows the Hugging Face / sentence-transformers card layout (YAML front matter with `library_name`, `tags`,
`pipeline_tag`, `base_model`; then prose), and says what a reader needs to trust or redo the model: method and
paper, backbone, training corpus, budget asked and consumed, seed, every score the database holds for it, and the
`bench run` command that reproduces it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from results_db.redact import redact

CARD_NAME = "README.md"


def _yaml_str(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid YAML scalar, quotes and colons included


def _budget(values: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in values.items()) if values else "-"


def scores_table(scores: pd.DataFrame) -> str:
    """Markdown table: one row per (suite, dataset, metric) with its n, one column per variant (clean first)."""
    if scores is None or scores.empty:
        return "(no scores recorded)"
    keys = ["suite", "dataset", "metric"]
    wide = scores.pivot_table(index=keys, columns="variant", values="value", aggfunc="last")
    counts = scores.groupby(keys)["n"].max() if "n" in scores else pd.Series(0, index=wide.index)
    variants = sorted(wide.columns, key=lambda v: (v != "clean", str(v)))
    lines = ["| suite | dataset | metric | n | " + " | ".join(variants) + " |", "|---" * (4 + len(variants)) + "|"]
    for key, row in wide[variants].iterrows():
        cells = ["" if pd.isna(row[v]) else f"{row[v]:.2f}" for v in variants]
        lines.append("| " + " | ".join(map(str, key)) + f" | {int(counts.get(key, 0)) or ''} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _whole_sets(scores: pd.DataFrame | None) -> bool:
    """Every score records that --limit was not below its dataset's size (`limit_above_size` in its info)."""
    from results_db.records import json_column

    if scores is None or scores.empty or "info" not in scores:
        return False
    return all(json_column(info).get("limit_above_size") for info in scores["info"])


def render_model_card(run: dict[str, Any], scores: pd.DataFrame, paper: str = "", model_info: dict[str, Any] | None = None) -> str:
    method = run.get("method", "")
    backbone = str(run.get("backbone", ""))
    config = run.get("config") or {}
    train = config.get("train") or {}
    info = model_info if model_info is not None else (run.get("model_info") or {})
    command = redact(str(run.get("command", "")).split("   # from:", 1)[0].strip())
    front = [
        "---",
        "library_name: sentence-transformers",
        "pipeline_tag: sentence-similarity",
        "tags:",
        "- sentence-transformers",
        "- feature-extraction",
        "- sentence-similarity",
        "- lenbench",
        f"- {method}",
    ]
    if backbone.lower() in ("minilm", "all-minilm-l6-v2"):
        front.append('base_model: "sentence-transformers/all-MiniLM-L6-v2"')  # the packaged copy of it
    elif backbone and not Path(backbone).is_absolute() and "/" in backbone:
        front.append(f"base_model: {_yaml_str(backbone)}")  # a hub id; local folders are named in the text
    front.append("---")
    limit = (config.get("eval") or {}).get("limit") or config.get("limit")
    if limit and _whole_sets(scores):  # --limit reached every dataset's size: full-set scores, no subset
        limit = None
    subset_note = (f" **Subset:** evaluated on the first {limit} items of each dataset (`--limit {limit}`); not "
                   "comparable to full-dataset numbers." if limit else "")
    size = ", ".join(f"{k} {v:,}" if isinstance(v, int) else f"{k} {v}" for k, v in info.items()) or "-"
    body = f"""
# {method} on {backbone}

A sentence encoder trained by lenbench's `bench run` (run {run.get('id', '?')}): the method
below applied to the backbone under the budget below, then evaluated (clean and, where asked, with elongated texts).

| | |
|---|---|
| method | `{method}` |
| paper | {paper or '-'} |
| backbone | `{backbone}` |
| training corpus | {run.get('train_corpus') or '-'} |
| budget asked | {_budget(run.get('budget_asked') or {})} |
| budget consumed | {_budget(run.get('budget_consumed') or {})} |
| max_len / batch size / lr | {train.get('max_len', '-')} / {train.get('batch_size', '-')} / {train.get('lr', '-')} |
| max_len / pooling (evaluation) | {(config.get('eval') or {}).get('max_len', '-')} / {(config.get('eval') or {}).get('pooling', '-')} |
| method hyper-parameters | `{json.dumps(config.get('method_config', {}), sort_keys=True)}` |
| seed | {run.get('seed', '-')} |
| size | {size} |
| code version | {run.get('code_version') or '-'} |
| config hash | `{run.get('config_hash', '')}` |

## Scores

From the results database ({len(scores) if scores is not None else 0} scores; `bench results --run {run.get('id', '?')}`).{subset_note}

{scores_table(scores)}

## Usage

```python
from sentence_transformers import SentenceTransformer

model = SentenceTransformer("path/to/this/folder")
embeddings = model.encode(["A sentence.", "Another one."])
```

The folder declares how the scores above were computed (`sentence_bert_config.json`: max_seq_length = the
evaluation max_len; `1_Pooling`: the evaluation pooling; then L2 normalisation), so these embeddings are the ones
lenbench scored. `bench eval --model path/to/this/folder --suite sts@elong` evaluates it again.

## Reproduce

```bash
{command}
```
"""
    return "\n".join(front) + "\n" + body


def write_model_card(db: Any, run_id: int, folder: str | Path, paper: str = "", name: str = CARD_NAME) -> Path:
    """Write README.md (or `name`) into the encoder folder from the database row and its scores; returns its path."""
    run = db.get_run(run_id)
    path = Path(folder) / name
    path.write_text(render_model_card(run, db.scores([run_id]), paper=paper))
    return path
