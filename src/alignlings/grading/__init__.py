"""Judging a learner's work on the trusted side: the grader (``grader``: templates, cases, reference
runs, misconceptions), the job a sandboxed process runs on the learner's code (``casejob``), the plain
wire format and comparison of values (``values``, ``behaviour``), the wording of results
(``feedback``), the ``Verdict`` contract (``verdict``; docs/verdict.schema.json), the author's
``dev check`` (``devcheck``, which grades a pack's own reference and misconceptions) and the Linux
sandbox (``sandbox/``). It reads ``alignlings.content`` and never ``alignlings.practice``: grading knows
nothing of learners, locks or progress."""
