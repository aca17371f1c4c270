"""The learner's state and the one gate to it: ``Practice`` (``session``) runs every learner action as
who is asking -> may they (track locks, assignments, limits) -> act -> record; ``service`` records
graded checks, ``review`` schedules spaced review (FSRS), ``cloze`` draws and checks blanks,
``report`` builds class reports, ``notebook`` is the Jupyter front, and ``store/`` keeps progress in
SQLite or PostgreSQL (schema, migrations, export and import). It uses ``alignlings.content`` and
``alignlings.grading``; the CLI and the web app (``alignlings.cli``, ``alignlings.web``) use it and only
authenticate, parse and render."""
