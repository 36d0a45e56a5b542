"""Language-model tools: KenLM models from text (generate_lm) and DeepSpeech scorer packages
(generate_scorer_package); both are console scripts and run as python -m."""
