"""Reviewing MLPerf logs: compliance with the rules of the round, time-to-train, the official
score of an entry, and the reference convergence check.

The entry point is `trainclock.review.tree.review_path(path) -> list[EntryReview]` (entry.py),
each with its runs as `RunReview` (run_review.py) and its verdict from the pure rules of
verdict.py (consistency, count, notes, RCP), combined by one precedence rule. Rules are data: the rule files of the
mlperf-logging package and trainclock's own in rules/ (rulebook.py loads them, compliance.py
evaluates them); scoring rules are rules/scoring.yaml. Each entry also says what the official
result summarizer would print for it (`EntryReview.summarizer`: score, runs used and dropped,
scaling factor; `EntryReview.rcp.official`: its RCP column), as data in as_json.py.
"""
