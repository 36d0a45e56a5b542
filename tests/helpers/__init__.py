"""The test infrastructure, imported as tests.helpers.<module> by the tests (pytest.ini puts the checkout on
their path) and by the benchmarks (run as `python -m benchmarks.<name>` from the checkout)."""
