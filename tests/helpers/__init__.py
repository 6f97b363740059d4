"""Helpers shared by the tests (not tests themselves): the CLI run in-process (``cli_main``), a
CPU torch that claims a GPU (``fake_cuda``), toy NLI rows (``nli_toy``), a script loaded as a
module (``script_module``) and a stub OpenAI-compatible server (``stub_server``). ``tests/`` is
on ``sys.path`` (pytest puts a root ``conftest.py``'s folder there), so they import as
``helpers.<module>``.
"""
