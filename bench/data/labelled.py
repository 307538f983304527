"""Labelled texts (jsonl lines {"text", "label"}, plain or .gz) for the kNN suite."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.data.errors import DataError
from bench.data.lines import read_jsonl
from bench.data.records import _require, nonblank, text_field


@dataclass
class LabelledData:
    name: str
    texts: list[str]
    labels: list[str]
    files: list[str] = field(default_factory=list)


def _label_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "a list" if isinstance(value, list) else "an object"


def _label_text(value: Any) -> str:
    """A label as the class name kNN compares: JSON's 2 and 2.0 are one number, so one class."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def read_labelled(path: str | os.PathLike[str], name: str | None = None) -> LabelledData:
    """Texts and their labels. Every label has one JSON type (1 and "1" would be two classes): a line whose label
    is of another type than the first line's, or a list or an object, is refused naming the line."""
    p = Path(path)
    texts: list[str] = []
    labels: list[str] = []
    first: tuple[int, str] | None = None  # the first label's line and kind
    for lineno, obj in read_jsonl(p):
        _require(obj, ("text", "label"), p, lineno)
        texts.append(nonblank(text_field(obj, "text", p, lineno), "'text'", p, lineno))
        label = obj["label"]
        if label is None:
            raise DataError(f"{p}:{lineno}: 'label' is null; give every text a label")
        kind = _label_kind(label)
        if kind in ("a list", "an object"):
            raise DataError(f"{p}:{lineno}: 'label' is {kind}; give every text one label, a string or a number")
        first = first or (lineno, kind)
        if kind != first[1]:
            raise DataError(
                f"{p}:{lineno}: 'label' {json.dumps(label)} is {kind} but line {first[0]}'s label is {first[1]}; "
                "give every label the same type (all strings or all numbers), or 1 and \"1\" count as two classes"
            )
        nonblank(str(label), "'label'", p, lineno)
        labels.append(_label_text(label))
    if not texts:
        raise DataError(f"{p}: no labelled texts")
    return LabelledData(name or p.name.split(".")[0], texts, labels, [str(p)])
