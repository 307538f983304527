"""`bench claim FILE`: does a paper's claim hold against its reference row and its controls (bench.claim.spec)."""
