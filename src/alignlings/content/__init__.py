"""What a pack says, read from disk: exercise packs and courses (``pack``), the ``Exercise`` record
(``exercise``, a leaf module), the registry of exercise kinds and review-item kinds (``kinds``), the
blanks of a template (``blanks``), the case API a pack's check.py uses (``checks``, also shipped to
sandboxed jobs), skeletons for ``dev new``, figures, and the predict and drill data (``predictions``,
``bugdrill``), the ``$...$`` formulas of a text (``mathtext``, for every interface); ``packlint`` proves a pack's structure. Nothing here grades or stores progress: it
imports neither ``alignlings.grading`` nor ``alignlings.practice`` at module level, and reads files
without importing torch or the learner's code, so listing exercises stays fast."""
