"""The practice system: exercise packs, the learner-code sandbox, grading and progress."""
