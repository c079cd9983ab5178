"""Put on a hub's PYTHONPATH, this makes its Python behave as if the ``ag2`` and ``mcp`` packages
were not installed (as in the AG2 wire's Lambdas, whose layer has neither): importing either, or
any module under it, raises ModuleNotFoundError (tests/e2e/test_ag2_wire.py)."""

import sys

BLOCKED = ("ag2", "mcp")


class _NotInstalled:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r} (blocked: tests/e2e/without_ag2)", name=name)
        return None


sys.meta_path.insert(0, _NotInstalled())
