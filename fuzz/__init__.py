"""Coverage-guided fuzzing of the event decoders and input readers (atheris); see fuzz/targets.py."""
