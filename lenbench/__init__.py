"""lenbench's Python API: the command line's jobs as functions, for a notebook or a script (see `lenbench.api`).

    import lenbench

    ev = lenbench.evaluate("minilm", suites="sts:stsb@elong", limit=300)      # = bench eval
    ev.to_pandas()                                                            # one row per score, with n and CI
    cmp = lenbench.run(methods=["laser3-self", "simcse"], budget="steps=60")  # = bench run
    print(cmp.report()); cmp.differences()                                    # differences as numbers
    lenbench.load("lenbench.sqlite").comparison()                             # what is stored (= bench results)
"""

from lenbench.api import Results, Store, evaluate, load, run
from lenbench.method import contrastive, hp

__all__ = ["Results", "Store", "contrastive", "evaluate", "hp", "load", "run"]
