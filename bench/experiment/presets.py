"""Named option sets for `bench run --preset NAME`: a short command for a job the README explains.

A preset fills in the options the user left at their defaults; any option given on the command line wins. The
run records the expanded options (its config and reproduce command), never the preset's name alone.

scratch   training works, shown offline on two CPU cores in minutes: crop and simcse train a randomly
          initialised bare token-embedding layer (`embedding-bag-32`, 32 wide, no transformer) for 200 steps of 16 on
          2,000 of the packaged wiki-offline articles, three training seeds each, and are scored with the untrained layer on `heldout`
          (known-item retrieval on wiki-offline articles kept out of training) and STS-B; learning curves every 50
          steps on 200 heldout queries. The crop-SSL paper's claim at CPU scale: crops teach a bare embedding layer
          (measured: heldout nDCG@10 8.49 untrained, crop +4.28 [2.42, 6.15], simcse +2.33 [1.94, 2.71] over 3
          seeds; STS-B not significantly changed; 2.5 min on 2 lightly loaded cores; README "Does training work?").
          32 wide, not 256: an untrained table is a random projection of the bag of words, and 256 random
          dimensions already keep word overlap about as well as 200 CPU steps of training can improve on
          (measured: heldout nDCG@10 20.66 untrained vs 20.71 +- 2.32 after crop, 3 seeds); 32 do not.
"""

from __future__ import annotations

from typing import Any

PRESETS: dict[str, dict[str, Any]] = {
    "scratch": {
        "method": "crop,simcse",
        "backbone": "embedding-bag-32",
        "corpus": "wiki-offline",
        "corpus_limit": 2000,  # crop splits every drawn article into sentences (pysbd, ~20 ms each): the cost to keep low
        "budget": "steps=200",
        "batch_size": 16,
        "max_len": 64,
        "lr": 1e-2,
        "seeds": "0,1,2",
        "suite": ["heldout", "sts:stsb"],
        "eval_every": 50,
        "curve_suite": ["heldout"],
        "curve_limit": 200,
    },
}


def apply_preset(values: dict[str, Any], defaults: dict[str, Any]) -> list[str]:
    """Fill `values` (option name -> value, RunSpec.option_values) with the preset's values where an option is at
    its default (`defaults`, the same for RunSpec()); returns the options it set."""
    name = values.get("preset")
    if not name:
        return []
    set_here = []
    for key, value in PRESETS[name].items():
        if values.get(key) == defaults[key]:
            values[key] = value
            set_here.append(key)
    return set_here
