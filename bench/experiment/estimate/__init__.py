"""What a `bench eval` or `bench run` will cost before it starts (`--estimate`), nothing trained, scored or recorded.

    evaluation   one evaluation: per dataset its sizes, caches, memory and time, calibrated on scored samples
    data         what each dataset holds, counted from its files or its published figures, and the samples
    run          one `bench run`: training calibrated per method, then every run scored as the evaluation says
    report       the table people read, and the times of an earlier identical run beside it

Owns: predictions. Never: records a row, or writes outside its own scratch folder.
"""
