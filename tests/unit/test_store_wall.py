"""The wall between the domain and storage (issue 29; docs/architecture.md "The layers"): outside
``shared/relaynet/store/`` no code spells a key attribute or talks to the table's primitives.

Read from the source with ``ast`` (nothing is imported), over ``shared/relaynet`` (the store
excepted) and ``functions/``:

- no string constant *is* a key attribute (``"PK"``, ``"SK"``, ``"GSI1PK"``, ``"GSI1SK"``, ... : as
  a dict key, a subscript, an argument, a tuple member) or names one inside an expression
  (``"attribute_not_exists(PK)"``, ``"SET GSI1SK = :lease"``); docstrings may describe the keys;
- nothing imports ``relaynet.store.table`` except for the table's plumbing, which is no storage
  access: an entry point's declared actions (``declares``, ``declared``, ``check_actions``,
  ``IDEMPOTENCY_ACTIONS``, ``UndeclaredAction``: least privilege, checked in the table), the
  stream's item codec (``decode``) and the commit listener (``on_commit``). A read or write
  (``get``, ``put``, ``query``, ``tx_put``, ``transact``, ``ride``, ...) goes through a repository
  of ``store/``;
- the domain commits through the unit of work (``relaynet.store.unit_of_work``): no code names
  ``TransactionCancelled`` or DynamoDB's 100-action limit (``MAX_TRANSACT_ITEMS``), and none
  draws a retry jitter of its own (``random.uniform``, ``random.random``).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.conftest import ROOT

KEY_ATTRIBUTE = re.compile(r"\b(?:PK|SK|GSI\d(?:PK|SK))\b")
TABLE = "relaynet.store.table"
#: What of relaynet.store.table code outside the store may use (module docstring).
PLUMBING = frozenset({"declares", "declared", "check_actions", "IDEMPOTENCY_ACTIONS", "UndeclaredAction",
                      "decode", "on_commit"})
#: Names only the store may use (module docstring): the unit of work answers an Outcome instead.
STORE_ONLY = frozenset({"TransactionCancelled", "MAX_TRANSACT_ITEMS"})
JITTER = frozenset({("random", "uniform"), ("random", "random")})

#: Files still on the domain's side of the wall -> why.
ALLOWED = {
    # not domain code
    "shared/relaynet/stream_records.py": "builds the stream records DynamoDB Streams carries (Keys holds the "
                                         "table's key attributes), shared by the local and AWS push at the write",
    "shared/relaynet/stream_targets.py": "generated from template.yaml's stream FilterCriteria, which name the "
                                         "table's attributes (make generate)",
}


def _sources() -> list[Path]:
    shared = [p for p in (ROOT / "shared" / "relaynet").rglob("*.py")
              if (ROOT / "shared" / "relaynet" / "store") not in p.parents]
    return sorted([*shared, *(ROOT / "functions").glob("*.py")])


def _docstrings(tree: ast.AST) -> set[int]:
    return {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}


def key_spellings(tree: ast.AST) -> list[str]:
    """``line: 'constant'`` of every string constant (docstrings aside) that is or names a key attribute."""
    docs = _docstrings(tree)
    found = [node for node in ast.walk(tree)
             if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
             and KEY_ATTRIBUTE.search(node.value)]
    return [f"{node.lineno}: {node.value[:60]!r}" for node in sorted(found, key=lambda n: (n.lineno, n.col_offset))]


def table_uses(tree: ast.AST) -> list[str]:
    """``line: what`` of every use of relaynet.store.table beyond :data:`PLUMBING`: a name imported
    from it, or an attribute of it (or the module itself) where it is imported as a module."""
    found: list[str] = []
    aliases: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == TABLE:
            found += [f"{node.lineno}: from {TABLE} import {a.name}" for a in node.names if a.name not in PLUMBING]
        elif isinstance(node, ast.ImportFrom) and node.module == "relaynet.store":
            aliases |= {a.asname or a.name for a in node.names if a.name == "table"}
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name == TABLE:
                    found.append(f"{node.lineno}: import {TABLE}")
    attribute_of: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            attribute_of.add(id(node.value))
            if node.attr not in PLUMBING:
                found.append(f"{node.lineno}: table.{node.attr}")
        elif isinstance(node, ast.Name) and node.id in aliases and id(node) not in attribute_of:
            found.append(f"{node.lineno}: the table module itself ({node.id})")
    return sorted(found, key=lambda f: int(f.split(":")[0]))


def unit_of_work_bypasses(tree: ast.AST) -> list[str]:
    """``line: what`` of every name of :data:`STORE_ONLY` (as a name, an attribute or an import)
    and every :data:`JITTER` call: a commit, a lost race or a backoff handled outside the unit of work."""
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in STORE_ONLY:
            found.append(f"{node.lineno}: {node.id}")
        elif isinstance(node, ast.Attribute) and node.attr in STORE_ONLY:
            found.append(f"{node.lineno}: .{node.attr}")
        elif isinstance(node, ast.ImportFrom):
            found += [f"{node.lineno}: import {a.name}" for a in node.names if a.name in STORE_ONLY]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and isinstance(node.func.value, ast.Name) and (node.func.value.id, node.func.attr) in JITTER):
            found.append(f"{node.lineno}: {node.func.value.id}.{node.func.attr}()")
    return sorted(found, key=lambda f: int(f.split(":")[0]))


def _breaches() -> dict[str, list[str]]:
    out = {}
    for path in _sources():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        found = key_spellings(tree) + table_uses(tree) + unit_of_work_bypasses(tree)
        if found:
            out[path.relative_to(ROOT).as_posix()] = found
    return out


def test_no_key_attribute_or_table_primitive_outside_the_store():
    breaches = {path: found for path, found in _breaches().items() if path not in ALLOWED}
    assert breaches == {}, "key attributes or table primitives outside shared/relaynet/store/ (move them into a repository): " + repr(breaches)


def test_the_allow_list_names_only_files_that_still_need_it():
    breaches = _breaches()
    stale = sorted(path for path in ALLOWED if path not in breaches)
    assert stale == [], f"these files no longer cross the wall: remove them from ALLOWED: {stale}"


def test_the_scan_sees_what_it_forbids():
    src = ('"""PK=NET#<net>, SK=META: a docstring may describe keys."""\n'
           "from relaynet.store import table as t\n"
           "from relaynet.store.table import MAX_TRANSACT_ITEMS, transact\n"
           "handler = t.declares(['GetItem'], 'x')(print)\n"
           "item = {'PK': pk, 'SK': sk}\n"
           "same = other['SK'] == sk\n"
           "t.put(item, 'attribute_not_exists(PK)')\n"
           "lease = 'SET GSI1SK = :lease'\n")
    tree = ast.parse(src)
    assert key_spellings(tree) == ["5: 'PK'", "5: 'SK'", "6: 'SK'", "7: 'attribute_not_exists(PK)'",
                                   "8: 'SET GSI1SK = :lease'"]
    assert table_uses(tree) == ["3: from relaynet.store.table import MAX_TRANSACT_ITEMS",
                                "3: from relaynet.store.table import transact", "7: table.put"]
    loop = ("from relaynet.store.table import TransactionCancelled\n"
            "try:\n    store.commit(actions)\nexcept store.TransactionCancelled:\n"
            "    time.sleep(random.uniform(0, 0.005))\n"
            "if len(actions) > MAX_TRANSACT_ITEMS:\n    pass\n")
    assert unit_of_work_bypasses(ast.parse(loop)) == ["1: import TransactionCancelled", "4: .TransactionCancelled",
                                                      "5: random.uniform()", "6: MAX_TRANSACT_ITEMS"]
